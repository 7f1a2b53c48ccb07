package chat

import "strings"

// Renderer renders a conversation to the prompt text of a model; Qwen3 and
// Qwen3Coder are Renderers.
type Renderer interface {
	Render(msgs []Message, tools []Tool, opt Options) (string, error)
}

// Continuation is the next request's prompt compared with what the model
// has already seen and produced.
type Continuation struct {
	// Prompt is the next request's full rendered prompt.
	Prompt string
	// Extends reports that Prompt begins with the previous prompt and
	// completion, byte for byte: the segment can grow by Suffix alone.
	Extends bool
	// Suffix is Prompt after the previous prompt and completion (the tool
	// results, the next user turn, the generation prompt); empty unless
	// Extends.
	Suffix string
}

// AppendOnly renders the next request (next, tools, opt) and tells whether
// it extends prev, the previous request's prompt followed by the completion
// text the model generated (its end token included).
//
// Chat templates are not append-only in general. Qwen3's drops the
// reasoning of assistant turns before the last user query and renders an
// assistant turn without reasoning, not last, with no <think> block, so
// after a new user query, after a harness drops reasoning_content, or when
// thinking was off or empty, the history no longer matches the tokens the
// model saw; arguments the model wrote in another JSON spacing re-render
// differently too. The proxy then starts a new segment with the new prompt
// instead of re-tokenizing history; when Extends is set it tokenizes only
// Suffix and appends it to the recorded ids (when prev ends with the end
// token, a special token, no BPE merge crosses the cut).
func AppendOnly(r Renderer, prev string, next []Message, tools []Tool, opt Options) (Continuation, error) {
	prompt, err := r.Render(next, tools, opt)
	if err != nil {
		return Continuation{}, err
	}
	suffix, ok := strings.CutPrefix(prompt, prev)
	if !ok {
		return Continuation{Prompt: prompt}, nil
	}
	return Continuation{Prompt: prompt, Extends: true, Suffix: suffix}, nil
}
