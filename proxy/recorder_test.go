package proxy

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/tokenizer"
)

// sim drives a recorder the way the proxy does, with a harness that keeps
// its conversation from what the template parsed out of each completion.
type sim struct {
	t    *testing.T
	tok  *tokenizer.Tokenizer
	rec  recorder
	call int
	// routed makes every generation report fake MoE routing.
	routed bool
	// placements of every call, in order.
	pls []placement
	// gens are the sampled ids of every call.
	gens [][]int32
}

var simTools = []chat.Tool{{Name: "bash", Description: "Run a command.",
	Parameters: json.RawMessage(`{"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}`)}}

// do renders msgs and tools, places the call, "generates" completion and
// commits it; it returns the message the harness would append.
func (s *sim) do(msgs []chat.Message, tools []chat.Tool, completion string) chat.Message {
	s.t.Helper()
	return s.doFinish(msgs, tools, completion, infer.FinishStop)
}

func (s *sim) doFinish(msgs []chat.Message, tools []chat.Tool, completion, finish string) chat.Message {
	s.t.Helper()
	prompt, err := chat.Qwen3{}.Render(msgs, tools, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		s.t.Fatal(err)
	}
	pl := s.rec.place(describe(prompt, Turn{Messages: msgs, Tools: tools}), s.tok.EncodeSpecial)
	if got := decode(s.t, s.tok, pl.prompt); got != prompt {
		s.t.Fatalf("call %d: the engine's prompt decodes to\n%q\nwant\n%q", s.call, got, prompt)
	}
	ids := s.tok.EncodeSpecial(completion)
	gen := infer.Generation{Tokens: ids, Finish: finish}
	for i, id := range ids {
		gen.Logprobs = append(gen.Logprobs, -0.5-float32(i%3))
		gen.Versions = append(gen.Versions, int64(10+s.call))
		if s.routed {
			gen.Routing = append(gen.Routing, fakeRoute(id))
		}
	}
	if s.routed {
		for _, id := range pl.prompt {
			gen.PromptRouting = append(gen.PromptRouting, fakeRoute(id))
		}
	}
	s.rec.commit(pl, s.call, gen, completion)
	s.pls = append(s.pls, pl)
	s.gens = append(s.gens, ids)
	s.call++
	s.check()
	p := chat.Qwen3{}.Parse(completion, tools)
	return chat.Message{Role: chat.RoleAssistant, Content: p.Content, ReasoningContent: p.Reasoning, ToolCalls: p.ToolCalls}
}

// check asserts the recorder's invariants: every segment's ids decode to
// its text, lists line up, mask 1 exactly on sampled tokens (which carry
// their logprobs and versions), 0 and zeros elsewhere.
func (s *sim) check() {
	s.t.Helper()
	for _, seg := range s.rec.segs {
		if got := decode(s.t, s.tok, seg.tokens()); got != seg.text {
			s.t.Fatalf("segment %d: ids decode to\n%q\ntext is\n%q", seg.index, got, seg.text)
		}
		n := len(seg.completion)
		if len(seg.mask) != n || len(seg.logprobs) != n || len(seg.versions) != n {
			s.t.Fatalf("segment %d: %d tokens, %d mask, %d logprobs, %d versions", seg.index, n, len(seg.mask), len(seg.logprobs), len(seg.versions))
		}
		for i, m := range seg.mask {
			if m == 0 && (seg.logprobs[i] != 0 || seg.versions[i] != 0) {
				s.t.Fatalf("segment %d token %d: mask 0 with logprob %v version %d", seg.index, i, seg.logprobs[i], seg.versions[i])
			}
			if m == 1 && (seg.logprobs[i] >= 0 || seg.versions[i] < 10) {
				s.t.Fatalf("segment %d token %d: mask 1 with logprob %v version %d", seg.index, i, seg.logprobs[i], seg.versions[i])
			}
		}
		if s.routed && !seg.routesBroken && len(seg.routes) != len(seg.prompt)+n {
			s.t.Fatalf("segment %d: %d routes for %d tokens", seg.index, len(seg.routes), len(seg.prompt)+n)
		}
	}
}

// Completions in the model's canonical format.
func toolCompletion(reasoning, cmd string) string {
	return "<think>\n" + reasoning + "\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\": \"" + cmd + "\"}}\n</tool_call><|im_end|>"
}

func answerCompletion(reasoning, answer string) string {
	return "<think>\n" + reasoning + "\n</think>\n\n" + answer + "<|im_end|>"
}

func toolResult(out string) chat.Message { return chat.Message{Role: chat.RoleTool, Content: out} }

var (
	simSystem = chat.Message{Role: chat.RoleSystem, Content: "You are a careful coder."}
	simUser   = chat.Message{Role: chat.RoleUser, Content: "Fix the failing test in calc.py."}
)

// agent runs the main thread of an agent for turns calls and returns the
// conversation so far (ending with the last assistant message).
func (s *sim) agent(turns int) []chat.Message {
	msgs := []chat.Message{simSystem, simUser}
	for i := 0; i < turns; i++ {
		if i > 0 {
			msgs = append(msgs, toolResult(strings.Repeat("line\n", i)+"ok"))
		}
		a := s.do(msgs, simTools, toolCompletion("step "+string(rune('a'+i)), "cat f"+string(rune('0'+i))))
		msgs = append(msgs, a)
	}
	return msgs
}

func TestRecorder(t *testing.T) {
	tok := testTokenizer(t)
	title := []chat.Message{{Role: chat.RoleSystem, Content: "Write a five-word title."}, {Role: chat.RoleUser, Content: "Fix the failing test in calc.py."}}
	type seg struct {
		side   bool
		reason string
		calls  [2]int // first, last
	}
	tests := []struct {
		name    string
		run     func(s *sim)
		want    []seg
		retries int
	}{
		{"append over three turns", func(s *sim) { s.agent(3) },
			[]seg{{false, ReasonFirst, [2]int{0, 2}}}, 0},
		{"final answer after tools", func(s *sim) {
			msgs := s.agent(2)
			msgs = append(msgs, toolResult("3 passed"))
			s.do(msgs, simTools, answerCompletion("tests pass", "Fixed the off-by-one."))
		}, []seg{{false, ReasonFirst, [2]int{0, 2}}}, 0},
		{"harness drops reasoning", func(s *sim) {
			msgs := s.agent(1)
			msgs[len(msgs)-1].ReasoningContent = ""
			msgs = append(msgs, toolResult("ok"))
			s.do(msgs, simTools, toolCompletion("next", "ls"))
		}, []seg{{false, ReasonFirst, [2]int{0, 0}}, {false, ReasonReasoningDropped, [2]int{1, 1}}}, 0},
		{"new user query drops reasoning in the template", func(s *sim) {
			msgs := s.agent(2)
			msgs = append(msgs, toolResult("ok"), chat.Message{Role: chat.RoleUser, Content: "Also add a test."})
			s.do(msgs, simTools, toolCompletion("more", "ls"))
		}, []seg{{false, ReasonFirst, [2]int{0, 1}}, {false, ReasonReasoningDropped, [2]int{2, 2}}}, 0},
		{"condensed history", func(s *sim) {
			s.agent(2)
			msgs := []chat.Message{simSystem, {Role: chat.RoleUser, Content: "Summary so far: read f0 and f1. Continue."}}
			s.do(msgs, simTools, toolCompletion("go on", "pytest"))
		}, []seg{{false, ReasonFirst, [2]int{0, 1}}, {false, ReasonRewrite, [2]int{2, 2}}}, 0},
		{"injected reminder", func(s *sim) {
			msgs := s.agent(2)
			msgs[1].Content += "\n<reminder>stay on task</reminder>"
			msgs = append(msgs, toolResult("ok"))
			s.do(msgs, simTools, toolCompletion("go on", "pytest"))
		}, []seg{{false, ReasonFirst, [2]int{0, 1}}, {false, ReasonRewrite, [2]int{2, 2}}}, 0},
		{"system prompt changed", func(s *sim) {
			msgs := s.agent(2)
			msgs[0].Content = "You are a very careful coder."
			msgs = append(msgs, toolResult("ok"))
			s.do(msgs, simTools, toolCompletion("go on", "pytest"))
		}, []seg{{false, ReasonFirst, [2]int{0, 1}}, {false, ReasonSystemChanged, [2]int{2, 2}}}, 0},
		{"tools changed", func(s *sim) {
			msgs := s.agent(2)
			msgs = append(msgs, toolResult("ok"))
			tools := append(slices.Clone(simTools), chat.Tool{Name: "edit"})
			s.do(msgs, tools, toolCompletion("go on", "pytest"))
		}, []seg{{false, ReasonFirst, [2]int{0, 1}}, {false, ReasonToolsChanged, [2]int{2, 2}}}, 0},
		{"completion re-rendered: compact JSON arguments", func(s *sim) {
			msgs := []chat.Message{simSystem, simUser}
			a := s.do(msgs, simTools, "<think>\nx\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"cmd\":\"ls\"}}\n</tool_call><|im_end|>")
			msgs = append(msgs, a, toolResult("ok"))
			s.do(msgs, simTools, toolCompletion("y", "pwd"))
		}, []seg{{false, ReasonFirst, [2]int{0, 0}}, {false, ReasonCompletionRerendered, [2]int{1, 1}}}, 0},
		{"completion cut by the length limit", func(s *sim) {
			msgs := []chat.Message{simSystem, simUser}
			a := s.doFinish(msgs, simTools, "<think>\nlong thought\n</think>\n\nI will", infer.FinishLength)
			msgs = append(msgs, a, chat.Message{Role: chat.RoleUser, Content: "go on"})
			s.do(msgs, simTools, answerCompletion("z", "done"))
		}, []seg{{false, ReasonFirst, [2]int{0, 0}}, {false, ReasonReasoningDropped, [2]int{1, 1}}}, 0},
		{"side request between turns", func(s *sim) {
			msgs := s.agent(1)
			s.do(title, nil, "<think>\n\n</think>\n\nFix calc test<|im_end|>")
			msgs = append(msgs, toolResult("ok"))
			s.do(msgs, simTools, toolCompletion("go on", "pytest"))
		}, []seg{{false, ReasonFirst, [2]int{0, 2}}, {true, ReasonSide, [2]int{1, 1}}}, 0},
		{"side request first: the main thread is re-tagged", func(s *sim) {
			s.do(title, nil, "<think>\n\n</think>\n\nFix calc test<|im_end|>")
			s.agent(2)
		}, []seg{{true, ReasonSide, [2]int{0, 0}}, {false, ReasonFirst, [2]int{1, 2}}}, 0},
		{"retry rolls back", func(s *sim) {
			msgs := s.agent(1)
			msgs = append(msgs, toolResult("ok"))
			s.do(msgs, simTools, toolCompletion("first try", "ls"))
			a := s.do(msgs, simTools, toolCompletion("second try", "ls -l"))
			msgs = append(msgs, a, toolResult("ok"))
			s.do(msgs, simTools, answerCompletion("done", "Done."))
		}, []seg{{false, ReasonFirst, [2]int{0, 3}}}, 1},
		{"retried side request", func(s *sim) {
			s.agent(1)
			s.do(title, nil, "<think>\n\n</think>\n\nA<|im_end|>")
			s.do(title, nil, "<think>\n\n</think>\n\nB<|im_end|>")
		}, []seg{{false, ReasonFirst, [2]int{0, 0}}, {true, ReasonSide, [2]int{1, 2}}}, 1},
	}
	for _, tt := range tests {
		for _, routed := range []bool{false, true} {
			name := tt.name
			if routed {
				name += "/routed"
			}
			t.Run(name, func(t *testing.T) {
				s := &sim{t: t, tok: tok, rec: newRecorder(), routed: routed}
				tt.run(s)
				var got []seg
				for _, sg := range s.rec.segs {
					got = append(got, seg{sg.side, sg.reason, [2]int{sg.firstCall, sg.lastCall}})
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("segments %+v, want %+v", got, tt.want)
				}
				if len(s.rec.retries) != tt.retries {
					t.Errorf("%d retries, want %d", len(s.rec.retries), tt.retries)
				}
				checkRows(t, s)
			})
		}
	}
}

// checkRows checks the rows: sampled tokens are exactly the generations
// that were kept (in call order), routing matches the fake router on every
// token, and rolled-back generations are in the audit copies.
func checkRows(t *testing.T, s *sim) {
	t.Helper()
	kept := map[int]bool{}
	for i := range s.gens {
		kept[i] = true
	}
	for _, r := range s.rec.retries {
		delete(kept, r.Call)
		if !slices.Equal(r.Tokens, s.gens[r.Call]) {
			t.Errorf("audit copy of call %d holds %v, generated %v", r.Call, r.Tokens, s.gens[r.Call])
		}
		if len(r.Logprobs) != len(r.Tokens) || len(r.Versions) != len(r.Tokens) {
			t.Errorf("audit copy of call %d: ragged lists", r.Call)
		}
	}
	var want, got [][]int32
	for i := range s.gens {
		if kept[i] {
			want = append(want, s.gens[i])
		}
	}
	for _, sg := range s.rec.segs {
		row := sg.row("run", 1, "ro", infer.DefaultSampling(0))
		if err := row.Validate(s.tok.VocabSize()); err != nil {
			t.Fatal(err)
		}
		for i, m := range row.LossMask {
			if m == 1 && row.PolicyVersions[i] < row.PolicyVersion {
				t.Errorf("policy_version %d is not the oldest (token %d has %d)", row.PolicyVersion, i, row.PolicyVersions[i])
			}
		}
		runs := sampledRuns(row.CompletionTokenIDs, row.LossMask)
		// a run may join two calls when no suffix separates them (never
		// in these scenarios: every prompt adds a turn)
		got = append(got, runs...)
		routes, err := row.Routes()
		if err != nil {
			t.Fatal(err)
		}
		if s.routed != !routes.Empty() {
			t.Fatalf("routed %v, row routing empty %v", s.routed, routes.Empty())
		}
		if s.routed {
			all := append(slices.Clone(row.PromptTokenIDs), row.CompletionTokenIDs...)
			for i, id := range all {
				for l, ids := range fakeRoute(id) {
					if !slices.Equal(routes.At(i, l), ids) {
						t.Fatalf("token %d layer %d routed to %v, want %v", i, l, routes.At(i, l), ids)
					}
				}
			}
		}
	}
	// Sampled runs come segment by segment; compare as multisets of calls.
	if len(got) != len(want) {
		t.Fatalf("%d sampled runs in the rows, %d kept generations", len(got), len(want))
	}
	for _, w := range want {
		found := false
		for i, g := range got {
			if g != nil && slices.Equal(g, w) {
				got[i], found = nil, true
				break
			}
		}
		if !found {
			t.Errorf("generation %v is not a sampled run of any row", w)
		}
	}
}

func TestRecorderRoutingGap(t *testing.T) {
	tok := testTokenizer(t)
	s := &sim{t: t, tok: tok, rec: newRecorder(), routed: true}
	msgs := s.agent(1)
	// The second call's generation comes without routing: the segment
	// drops its routing rather than hold a ragged table.
	prompt, _ := chat.Qwen3{}.Render(append(msgs, toolResult("ok")), simTools, chat.Options{AddGenerationPrompt: true})
	pl := s.rec.place(describe(prompt, Turn{Messages: msgs, Tools: simTools}), tok.EncodeSpecial)
	ids := tok.EncodeSpecial("x<|im_end|>")
	_, gap := s.rec.commit(pl, 1, infer.Generation{Tokens: ids, Logprobs: make([]float32, len(ids)), Finish: infer.FinishStop}, "x<|im_end|>")
	if !gap {
		t.Error("no routing gap reported")
	}
	row := s.rec.segs[0].row("run", 0, "ro", infer.DefaultSampling(0))
	if err := row.Validate(tok.VocabSize()); err != nil {
		t.Fatal(err)
	}
	if len(row.RoutingExperts) != 0 {
		t.Errorf("routing kept over a gap: %d ids", len(row.RoutingExperts))
	}
}

func TestForkReasonUnits(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"a<think>\nx\n</think>\n\nb", "ab"},
		{"<think></think>b<think>y</think>\nc", "bc"},
		{"no think", "no think"},
		{"<think>unclosed", "<think>unclosed"},
	}
	for _, tt := range tests {
		if got := stripThink(tt.in); got != tt.want {
			t.Errorf("stripThink(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if callSeed(1, 0) == callSeed(1, 1) || callSeed(1, 0) == callSeed(2, 0) || callSeed(7, 3) != callSeed(7, 3) {
		t.Error("callSeed does not separate calls and rollouts")
	}
}
