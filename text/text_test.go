package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOneLine(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"empty", "", 10, ""},
		{"folds white space", " a\n\tb \r\n c  ", 0, "a b c"},
		{"short enough", "abc", 3, "abc"},
		{"cut", "abcdef", 3, "abc..."},
		{"cut after folding", "a  b  c  d", 5, "a b c..."},
		{"cut at a rune", "ééééé", 2, "éé..."},
		{"multi-byte within max runes", "éééé", 4, "éééé"},
		{"no cut", strings.Repeat("x", 5000), 0, strings.Repeat("x", 5000)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := OneLine(tt.in, tt.max)
			if got != tt.want {
				t.Errorf("OneLine(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r\t") {
				t.Errorf("OneLine(%q, %d) = %q: not one valid line", tt.in, tt.max, got)
			}
		})
	}
}
