package chat

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchFixture is a 20-turn agent conversation with three tools: system,
// user, then 20 assistant turns (reasoning, text, a tool call) each answered
// by a tool result, ending with the generation prompt.
var benchFixture = filepath.Join(qwen3Dir, "bench_20_turns.json")

// BenchmarkQwen3Render renders the 20-turn conversation. The anchor is the
// real Jinja template rendered by transformers' environment in Python
// (tools/jinja-ref/render.py --bench), timed in the same run: the metric
// jinja/go is how many times faster the Go renderer is.
func BenchmarkQwen3Render(b *testing.B) {
	msgs, tools, opt := loadFixture(b, benchFixture)
	out, err := Qwen3{}.Render(msgs, tools, opt)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := (Qwen3{}).Render(msgs, tools, opt); err != nil {
			b.Fatal(err)
		}
	}
	goNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.StopTimer()
	b.ReportMetric(float64(len(msgs)), "messages")
	b.ReportMetric(jinjaSecondsPerRender(b)*1e9/goNs, "jinja/go")
}

// jinjaSecondsPerRender times the Jinja reference on the bench fixture.
func jinjaSecondsPerRender(b *testing.B) float64 {
	b.Helper()
	if err := exec.Command(referencePython, "-c", "import jinja2").Run(); err != nil {
		b.Fatalf("the Jinja anchor needs %s with jinja2 (apt-get install -y python3-jinja2): %v", referencePython, err)
	}
	out, err := exec.Command(referencePython, renderScript, "--bench", "100", qwen3Template, benchFixture).Output()
	if err != nil {
		b.Fatalf("render.py --bench: %v", err)
	}
	var secs map[string]float64
	if err := json.Unmarshal(out, &secs); err != nil || secs[benchFixture] <= 0 {
		b.Fatalf("render.py --bench output %q: %v", out, err)
	}
	return secs[benchFixture]
}

// benchCompletion is a typical agent completion: reasoning, a sentence and
// two tool calls.
const benchCompletion = "<think>\nThe split keeps the spaces around each item, so the comparison with the stripped " +
	"expected list fails. I should edit parse() to strip each item and then run the focused test.\n</think>\n\n" +
	"I'll fix the whitespace handling and run the test.\n" +
	"<tool_call>\n{\"name\": \"edit\", \"arguments\": {\"path\": \"src/parse.py\", \"old\": \"return s.split(',')\", " +
	"\"new\": \"return [x.strip() for x in s.split(',')]\"}}\n</tool_call>\n" +
	"<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"python -m pytest -q tests/test_parse.py\", \"timeout\": 120}}\n</tool_call><|im_end|>"

const benchCoderCompletion = "I'll fix the whitespace handling and run the test.\n" +
	"<tool_call>\n<function=edit>\n<parameter=path>\nsrc/parse.py\n</parameter>\n<parameter=count>\n1\n</parameter>\n" +
	"<parameter=opts>\n{\"old\": \"return s.split(',')\", \"new\": \"return [x.strip() for x in s.split(',')]\"}\n</parameter>\n</function>\n</tool_call>\n" +
	"<tool_call>\n<function=bash>\n<parameter=command>\npython -m pytest -q tests/test_parse.py\n</parameter>\n" +
	"<parameter=timeout>\n120\n</parameter>\n</function>\n</tool_call><|im_end|>"

// benchParse times parse on text and, as the anchor in the same run, the
// decoding with encoding/json of the same result as an OpenAI-style
// message; the metric parse/json-decode is how many times slower parsing
// the model's text is than decoding that JSON.
func benchParse(b *testing.B, text string, parse func(string, []Tool) Parsed) {
	p := parse(text, testTools)
	if p.Failed || len(p.ToolCalls) != 2 {
		b.Fatalf("bench completion does not parse: %+v", p)
	}
	anchor, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if q := parse(text, testTools); q.Failed {
			b.Fatal(q.Reason)
		}
	}
	parseNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		var q Parsed
		if err := json.Unmarshal(anchor, &q); err != nil {
			b.Fatal(err)
		}
	}
	jsonNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(parseNs/jsonNs, "parse/json-decode")
}

func BenchmarkQwen3Parse(b *testing.B) { benchParse(b, benchCompletion, Qwen3{}.Parse) }

func BenchmarkQwen3CoderParse(b *testing.B) { benchParse(b, benchCoderCompletion, Qwen3Coder{}.Parse) }

// BenchmarkAppendOnly checks one 20-turn step: render and prefix compare.
func BenchmarkAppendOnly(b *testing.B) {
	msgs, tools, opt := loadFixture(b, benchFixture)
	prevOpt := opt
	prev, err := Qwen3{}.Render(msgs[:len(msgs)-2], tools, prevOpt)
	if err != nil {
		b.Fatal(err)
	}
	full, err := Qwen3{}.Render(msgs, tools, Options{})
	if err != nil {
		b.Fatal(err)
	}
	// prev + the completion the model generated for the last assistant turn.
	prev = full[:strings.LastIndex(full, imStart+"user")-1]
	b.ReportAllocs()
	for b.Loop() {
		c, err := AppendOnly(Qwen3{}, prev, msgs, tools, opt)
		if err != nil || !c.Extends {
			b.Fatalf("extends=%v err=%v", c.Extends, err)
		}
	}
}

// BenchmarkRenderAppend renders one 20-turn step from the rendering of the
// step before, as the proxy does for a call that extends its segment
// (compare BenchmarkQwen3Render, the whole conversation).
func BenchmarkRenderAppend(b *testing.B) {
	msgs, tools, opt := loadFixture(b, benchFixture)
	prev, err := Qwen3{}.RenderAppend(nil, msgs[:len(msgs)-2], tools, Options{AddGenerationPrompt: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Qwen3{}).RenderAppend(prev, msgs, tools, opt); err != nil {
			b.Fatal(err)
		}
	}
}
