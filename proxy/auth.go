package proxy

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// ErrToken is returned by ReadToken for a token file it cannot use.
var ErrToken = errors.New("proxy: token")

// ReadToken reads a bearer token from a file: its content with surrounding
// white space trimmed. An empty token, or one with white space or control
// characters inside, is an error: a client could not send it in a header.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w file: %w", ErrToken, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%w file %s: empty", ErrToken, path)
	}
	for _, r := range tok {
		if r <= ' ' || r == 0x7f {
			return "", fmt.Errorf("%w file %s: the token has white space or a control character inside", ErrToken, path)
		}
	}
	return tok, nil
}

// RequireToken wraps h so that it serves only requests that carry token:
// as "Authorization: Bearer TOKEN" (OpenAI clients, Prometheus) or as
// "x-api-key: TOKEN" (Anthropic clients). Anything else gets 401 with an
// error body that both OpenAI and Anthropic clients read, and h never sees
// it. The comparison takes the same time wherever the tokens differ.
func RequireToken(token string, h http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("x-api-key")
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = strings.TrimSpace(bearer)
		}
		if got == "" || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="legorl"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			msg := "missing bearer token (Authorization: Bearer TOKEN or x-api-key: TOKEN)"
			if got != "" {
				msg = "wrong bearer token"
			}
			fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","message":%q}}`+"\n", msg)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TokenGuard reads the token file at path and returns what wraps a
// handler in RequireToken with it; with path empty, a wrapper that
// changes nothing.
func TokenGuard(path string) (func(http.Handler) http.Handler, error) {
	if path == "" {
		return func(h http.Handler) http.Handler { return h }, nil
	}
	tok, err := ReadToken(path)
	if err != nil {
		return nil, err
	}
	return func(h http.Handler) http.Handler { return RequireToken(tok, h) }, nil
}

// Access says, for a server's exposure line, who it serves: everyone
// who reaches it, or only holders of the token in tokenFile.
func Access(tokenFile string) string {
	if tokenFile == "" {
		return "anyone who reaches it can generate (no --token-file)"
	}
	return "only requests with the --token-file token are served"
}
