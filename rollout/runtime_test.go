package rollout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/model"
)

// savedPolicy writes a small random checkpoint with the test tokenizer
// and, when version > 0, a lineage header of that version.
func savedPolicy(t *testing.T, version int64) string {
	t.Helper()
	setup(t)
	m := randomModel(t)
	dir := t.TempDir()
	if err := m.Save(dir, model.SaveOptions{TokenizerFiles: []string{"../policy/tokenizer/testdata/small/tokenizer.json"}}); err != nil {
		t.Fatal(err)
	}
	if version > 0 {
		lin := fmt.Sprintf(`{"format": "legorl-lineage/1", "version": %d, "parent": {"version": %d}}`, version, version-1)
		if err := os.WriteFile(filepath.Join(dir, "lineage.json"), []byte(lin), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRuntime: New assembles the policy, the proxy and (unless
// SandboxNone) the sandbox backend and grader from explicit options; the
// version comes from the options or the checkpoint header; a bad option
// is ErrOptions and builds nothing.
func TestRuntime(t *testing.T) {
	pol := savedPolicy(t, 3)
	ctx := context.Background()
	rt, err := New(ctx, Options{Policy: pol, Version: -1, Compute: "cpu", Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Version != 3 || rt.Proxy == nil || rt.Tokenizer == nil || rt.Backend != nil || rt.Grader != nil || len(rt.Warnings) != 0 {
		t.Errorf("runtime %+v", rt)
	}
	rt.Close()
	rt.Close() // idempotent

	rt, err = New(ctx, Options{Policy: pol, Version: 5, Sandbox: SandboxLocal})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Version != 5 || rt.Backend == nil || rt.Grader == nil {
		t.Errorf("runtime %+v", rt)
	}
	rt.Close()

	// A remote engine needs only the tokenizer (and config.json for the
	// context length); nothing is dialled until a call.
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	rt, err = New(ctx, Options{Policy: pol, Version: -1, Remote: Remote{Kind: RemoteVLLM, URL: srv.URL}, Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()

	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{"template", Options{Template: "llama"}, `unknown template "llama"`},
		{"sandbox", Options{Sandbox: "vm"}, `unknown sandbox backend "vm"`},
		{"remote kind", Options{Remote: Remote{Kind: "tgi", URL: srv.URL}}, `unknown remote engine "tgi"`},
		{"remote url", Options{Remote: Remote{Kind: RemoteSGLang}}, "needs a URL"},
		{"compute", Options{Compute: "tpu"}, `compute tpu`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Policy = pol
			if tt.o.Sandbox == "" {
				tt.o.Sandbox = SandboxNone
			}
			rt, err := New(ctx, tt.o)
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tt.want) || rt != nil {
				t.Errorf("%v, want ErrOptions with %q", err, tt.want)
			}
		})
	}
	if _, err := New(ctx, Options{Policy: t.TempDir(), Sandbox: SandboxNone}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("no checkpoint: %v", err)
	}
}
