// Package text holds the one helper that every layer uses to put foreign
// text (a command's stderr, a server's message, an error) into one line of
// an error message or a row field. It imports nothing of the project, so
// it sits below every layer (internal/archtest).
package text

import "strings"

// OneLine folds s's runs of white space into single spaces, trims both
// ends, and cuts what is left after max runes, marking the cut with "..."
// (max <= 0: no cut). Cutting at a rune keeps the result valid UTF-8.
func OneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if max > 0 && len(s) > max { // a string of at most max bytes has at most max runes
		if r := []rune(s); len(r) > max {
			s = string(r[:max]) + "..."
		}
	}
	return s
}
