package chat

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// The Qwen3-Coder template is not committed (no npm package ships it; see
// testdata/qwen3coder/SOURCE.md). Given its path, TestQwen3CoderGolden
// renders the fixtures and 300 random conversations with it through the
// Jinja reference and compares; with -update too, it rewrites the golden
// files from that output.
var coderTemplate = flag.String("coder-template", "", "path to Qwen3-Coder's chat_template.jinja (or tokenizer_config.json): compare with real Jinja, and with -update rewrite testdata/qwen3coder/*.golden")

const coderDir = "testdata/qwen3coder"

func TestQwen3CoderGolden(t *testing.T) {
	paths := fixtures(t, coderDir)
	var jinja map[string]string
	if *coderTemplate != "" {
		jinja = jinjaRender(t, *coderTemplate, paths)
		if *update {
			for path, text := range jinja {
				if err := os.WriteFile(goldenPath(path), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if *coderTemplate != "" {
		t.Run("random", func(t *testing.T) { coderRandomMatchesJinja(t, *coderTemplate) })
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want := checkGolden(t, Qwen3Coder{}, path, "-coder-template PATH -update")
			if jinja != nil && jinja[path] != want {
				t.Errorf("golden file differs from Jinja now at byte %d", firstDiff(jinja[path], want))
			}
		})
	}
}

func TestQwen3CoderRenderErrors(t *testing.T) {
	tests := []struct {
		name  string
		msgs  []Message
		tools []Tool
		want  error
	}{
		{"no messages", nil, nil, ErrNoMessages},
		{"unknown role", []Message{{Role: "developer"}}, nil, ErrRole},
		{"arguments not an object", []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: []byte(`[1]`)}}}}, nil, ErrArguments},
		{"bad arguments", []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: []byte(`{`)}}}}, nil, ErrArguments},
		{"bad parameters", []Message{{Role: "user"}}, []Tool{{Name: "f", Parameters: []byte(`{]`)}}, ErrArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := (Qwen3Coder{}).Render(tt.msgs, tt.tools, Options{}); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}
