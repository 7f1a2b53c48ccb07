package chat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const qwen3Dir = "testdata/qwen3"

var qwen3Template = filepath.Join(qwen3Dir, "chat_template.jinja")

// TestQwen3Golden renders every fixture and compares it with the golden file
// that real Jinja produced from Qwen3's own template. With -update the golden
// files are first rewritten by the reference renderer.
func TestQwen3Golden(t *testing.T) {
	paths := fixtures(t, qwen3Dir)
	if *update {
		for path, text := range jinjaRender(t, qwen3Template, paths) {
			if err := os.WriteFile(goldenPath(path), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			checkGolden(t, Qwen3{}, path, "-update")
		})
	}
}

// TestQwen3MatchesJinja re-runs the Jinja reference now (python3-jinja2) and
// requires the Go renderer and the committed golden files to agree with it,
// so a golden file edited by hand or a changed template cannot hide a
// difference.
func TestQwen3MatchesJinja(t *testing.T) {
	paths := fixtures(t, qwen3Dir)
	rendered := jinjaRender(t, qwen3Template, paths)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want, ok := rendered[path]
			if !ok {
				t.Fatalf("render.py returned nothing for %s", path)
			}
			msgs, tools, opt := loadFixture(t, path)
			got, err := Qwen3{}.Render(msgs, tools, opt)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("render differs from Jinja at byte %d:\n got: %q\nwant: %q", firstDiff(got, want), got, want)
			}
			golden, err := os.ReadFile(goldenPath(path))
			if err != nil || string(golden) != want {
				t.Errorf("golden file %s is stale (run go test -run TestQwen3Golden -update): %v", goldenPath(path), err)
			}
		})
	}
}

func TestQwen3RenderErrors(t *testing.T) {
	tests := []struct {
		name  string
		msgs  []Message
		tools []Tool
		want  error
	}{
		{"no messages", nil, nil, ErrNoMessages},
		{"unknown role", []Message{{Role: "user", Content: "x"}, {Role: "developer", Content: "y"}}, nil, ErrRole},
		{"bad arguments", []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: []byte(`{"a":`)}}}}, nil, ErrArguments},
		{"arguments with trailing data", []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: []byte(`{} {}`)}}}}, nil, ErrArguments},
		{"bad parameters", []Message{{Role: "user", Content: "x"}}, []Tool{{Name: "f", Parameters: []byte(`{"type":}`)}}, ErrArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Qwen3{}.Render(tt.msgs, tt.tools, Options{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestPyFloat(t *testing.T) {
	// Python 3: repr(float(x)) for each literal.
	tests := map[string]string{
		"1.0": "1.0", "0.1": "0.1", "1e16": "1e+16", "1e15": "1000000000000000.0",
		"1.5e16": "1.5e+16", "0.0001": "0.0001", "0.00001": "1e-05", "1.23e-7": "1.23e-07",
		"-2.5": "-2.5", "-0.0": "-0.0", "0e0": "0.0", "123.456": "123.456", "1e400": "Infinity",
		"-1e400": "-Infinity", "1e-400": "0.0", "5e-324": "5e-324", "1.7976931348623157e308": "1.7976931348623157e+308",
		"12345678901234567.0": "1.2345678901234568e+16", "9999999999999998.0": "9999999999999998.0",
		"3": "3", "-0": "0", "-12": "-12", "100000000000000000000000": "100000000000000000000000",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			if got := pyNumber(in); got != want {
				t.Errorf("pyNumber(%s) = %s, want %s", in, got, want)
			}
		})
	}
}

// firstDiff returns the first byte offset where a and b differ.
// checkGolden renders the fixture at path with r and compares the prompt
// with the fixture's golden file (the Jinja template's output), which it
// returns; flags is how to run the test to make the golden file.
func checkGolden(t *testing.T, r Renderer, path, flags string) string {
	t.Helper()
	b, err := os.ReadFile(goldenPath(path))
	if err != nil {
		t.Fatalf("%v (run with %s)", err, flags)
	}
	want := string(b)
	msgs, tools, opt := loadFixture(t, path)
	got, err := r.Render(msgs, tools, opt)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("render differs from the golden file (Jinja's output) at byte %d:\n got: %q\nwant: %q", firstDiff(got, want), got, want)
	}
	return want
}

func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
