package proxy

import (
	"encoding/json"
	"testing"
)

// checkUnquote requires unquoteJSON to agree with encoding/json on raw
// whenever it decodes it, and to decline what encoding/json rejects.
func checkUnquote(t *testing.T, raw []byte) {
	t.Helper()
	got, ok := unquoteJSON(raw)
	var want string
	err := json.Unmarshal(raw, &want)
	if ok && (err != nil || got != want) {
		t.Fatalf("unquoteJSON(%q) = %q, encoding/json %q, %v", raw, got, want, err)
	}
}

func TestUnquoteJSON(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		fast bool // decoded without encoding/json
	}{
		{`""`, true}, {`"plain text"`, true}, {`"a\nb\tc\r\"d\\e\/f\bg\fh"`, true},
		{`"\u00e9t\u00C9 \u4e2d\u0000"`, true}, {`"é日本"`, true},
		{`"\ud83d\ude00"`, false}, {`"\ud83d"`, false}, {"\"bad \xff utf8\"", false},
		{`"\x"`, false}, {`"\u12"`, false}, {`"\u12zz"`, false}, {`"a\"`, false},
		{"\"ctl \x01\"", false}, {`abc`, false}, {`"`, false}, {`"a"b"`, false},
	} {
		_, ok := unquoteJSON([]byte(tc.raw))
		if ok != tc.fast {
			t.Errorf("unquoteJSON(%q): decoded %v, want %v", tc.raw, ok, tc.fast)
		}
		checkUnquote(t, []byte(tc.raw))
	}
	// Every string encoding/json writes round-trips.
	for _, s := range []string{"line1\nline2\t\"q\"\\ <html> & \u2028 \x7f", "def f():\n    return {'a': [1, 2]}\n"} {
		raw, _ := json.Marshal(s)
		if got, ok := unquoteJSON(raw); !ok || got != s {
			t.Errorf("round trip of %q: %q, %v", s, got, ok)
		}
	}
}

func FuzzUnquoteJSON(f *testing.F) {
	for _, s := range []string{`"a\nb"`, `"\u00e9"`, `"\ud83d\ude00"`, "\"\xff\"", `"x\"y"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkUnquote(t, raw) })
}
