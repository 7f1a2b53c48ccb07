package doccheck

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode"
)

// Link is one inline Markdown link, [text](Target), and the line it is on.
type Link struct {
	Line   int
	Target string
}

// inlineLink matches [text](target) and ![alt](target); the target ends at
// the first space (a title may follow) or closing parenthesis.
var inlineLink = regexp.MustCompile(`\]\(<?([^)\s>]*)>?(?:\s+"[^"]*")?\)`)

// codeSpan matches an inline code span, whose text is not Markdown.
var codeSpan = regexp.MustCompile("`+[^`]*`+")

// Links returns the inline links of a Markdown document outside fenced
// code blocks and code spans.
func Links(r io.Reader) ([]Link, error) {
	var links []Link
	err := eachProse(r, func(n int, line string) {
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			links = append(links, Link{Line: n, Target: m[1]})
		}
	})
	return links, err
}

// eachProse calls fn with each line (and its number) of a Markdown
// document that is not in a fenced code block.
func eachProse(r io.Reader, fn func(n int, line string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence):
				fence = ""
			}
			continue
		}
		if fence == "" {
			fn(n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("doccheck: reading markdown: %w", err)
	}
	return nil
}

// fenceOf returns the fence (``` or ~~~, as long as written) that opens or
// closes a code block on this line, or "".
func fenceOf(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return ""
	}
	for _, c := range []byte{'`', '~'} {
		i := 0
		for i < len(t) && t[i] == c {
			i++
		}
		if i >= 3 {
			return t[:i]
		}
	}
	return ""
}

// External reports whether a link target leaves the repository (a URL
// with a scheme, or a mail address); those are not checked.
func External(target string) bool {
	if strings.HasPrefix(target, "mailto:") {
		return true
	}
	scheme, _, ok := strings.Cut(target, "://")
	return ok && !strings.ContainsAny(scheme, "/.#")
}

// Anchors returns the fragment of each heading of a Markdown document, as
// GitHub makes them: lowercased, punctuation dropped, spaces made hyphens,
// and -1, -2, ... added to repeats.
func Anchors(r io.Reader) (map[string]bool, error) {
	anchors := map[string]bool{}
	seen := map[string]int{}
	err := eachProse(r, func(_ int, line string) {
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			return
		}
		slug := Slug(text)
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors, err
}

// Slug is GitHub's anchor for a heading's text.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
