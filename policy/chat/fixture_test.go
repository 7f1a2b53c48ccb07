package chat

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the Jinja reference renderer (tools/jinja-ref/render.py)")

// referencePython is Debian's python3, which has python3-jinja2; the python3
// first on PATH may be another one without it.
const referencePython = "/usr/bin/python3"

// renderScript is the Jinja reference renderer, relative to this package.
const renderScript = "../../tools/jinja-ref/render.py"

// fixture is a conversation in the keyword arguments of transformers'
// apply_chat_template (OpenAI-shaped messages and tools), the format
// render.py reads. The tests translate it to the package's own types, as
// the proxy will translate wire formats.
type fixture struct {
	Messages []struct {
		Role             string `json:"role"`
		Content          string `json:"content"`
		ReasoningContent string `json:"reasoning_content"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
		Name       string `json:"name"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	AddGenerationPrompt bool  `json:"add_generation_prompt"`
	EnableThinking      *bool `json:"enable_thinking"`
}

// loadFixture reads a fixture file into messages, tools and options.
func loadFixture(t testing.TB, path string) ([]Message, []Tool, Options) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var msgs []Message
	for _, m := range f.Messages {
		msg := Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent,
			ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		msgs = append(msgs, msg)
	}
	var tools []Tool
	for _, tl := range f.Tools {
		tools = append(tools, Tool{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: tl.Function.Parameters})
	}
	opt := Options{AddGenerationPrompt: f.AddGenerationPrompt,
		DisableThinking: f.EnableThinking != nil && !*f.EnableThinking}
	return msgs, tools, opt
}

// fixtures lists the fixture files of a template's testdata folder.
func fixtures(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s (%v)", dir, err)
	}
	sort.Strings(paths)
	return paths
}

// jinjaRender runs the reference renderer over fixtures with template and
// returns the rendered text per fixture path. It fails the test when
// /usr/bin/python3 or its jinja2 module is missing: `make test` installs
// Debian's python3-jinja2.
func jinjaRender(t testing.TB, template string, paths []string) map[string]string {
	t.Helper()
	if err := exec.Command(referencePython, "-c", "import jinja2").Run(); err != nil {
		t.Fatalf("the Jinja reference needs %s with jinja2 (apt-get install -y python3-jinja2): %v", referencePython, err)
	}
	cmd := exec.Command(referencePython, append([]string{renderScript, template}, paths...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render.py: %v: %s", err, stderr.String())
	}
	var rendered map[string]string
	if err := json.Unmarshal(out, &rendered); err != nil {
		t.Fatalf("render.py output: %v", err)
	}
	return rendered
}

// goldenPath is the golden file of a fixture.
func goldenPath(fixturePath string) string {
	return strings.TrimSuffix(fixturePath, ".json") + ".golden"
}
