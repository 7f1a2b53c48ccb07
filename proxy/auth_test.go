package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want, err string
	}{
		{"plain", "s3cret", "s3cret", ""},
		{"trailing newline", "  s3cret\n", "s3cret", ""},
		{"empty", " \n", "", "empty"},
		{"space inside", "s3 cret", "", "white space"},
		{"control inside", "s3\x01cret", "", "control"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadToken(p)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
			}
		} else if !errors.Is(err, ErrToken) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
	if _, err := ReadToken(filepath.Join(dir, "missing")); !errors.Is(err, ErrToken) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestRequireToken(t *testing.T) {
	served := 0
	h := RequireToken("s3cret", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		io.WriteString(w, "ok")
	}))
	for _, tc := range []struct {
		name   string
		header map[string]string
		code   int
		body   string
	}{
		{"none", nil, 401, "missing bearer token"},
		{"wrong bearer", map[string]string{"Authorization": "Bearer nope"}, 401, "wrong bearer token"},
		{"prefix of the token", map[string]string{"Authorization": "Bearer s3cre"}, 401, "wrong"},
		{"basic scheme", map[string]string{"Authorization": "Basic s3cret"}, 401, "missing"},
		{"bearer", map[string]string{"Authorization": "Bearer s3cret"}, 200, "ok"},
		{"x-api-key", map[string]string{"x-api-key": "s3cret"}, 200, "ok"},
		{"wrong x-api-key", map[string]string{"x-api-key": "s3cretX"}, 401, "wrong"},
	} {
		before := served
		r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader("{}"))
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, w.Code, w.Body.String(), tc.code, tc.body)
		}
		if want := before + map[bool]int{true: 1, false: 0}[tc.code == 200]; served != want {
			t.Errorf("%s: the handler ran %d times, want %d", tc.name, served-before, want-before)
		}
		if tc.code == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate", tc.name)
		}
	}
}
