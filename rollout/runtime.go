package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/legorl/legorl/policy/backend"
	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/checkpoint"
	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/remote"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/docker"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/tasks"
)

// ErrOptions: Options that cannot build a Runtime (an unknown template,
// remote kind, sandbox backend or compute backend).
var ErrOptions = errors.New("rollout: bad runtime options")

// Remote engine kinds (Options.Remote.Kind).
const (
	RemoteVLLM   = "vllm"
	RemoteSGLang = "sglang"
)

// Sandbox backends (Options.Sandbox).
const (
	SandboxLocal  = "local"
	SandboxDocker = "docker"
	// SandboxNone builds no sandbox backend and no grader: a Runtime that
	// only serves the policy (legorl serve).
	SandboxNone = "none"
)

// Templates names the chat templates Options.Template takes.
func Templates() []string { return []string{"qwen3", "qwen3-coder"} }

// Template returns the chat template of a name in Templates.
func Template(name string) (proxy.Template, error) {
	switch name {
	case "qwen3":
		return chat.Qwen3{}, nil
	case "qwen3-coder":
		return chat.Qwen3Coder{}, nil
	}
	return nil, fmt.Errorf("%w: unknown template %q: want %s", ErrOptions, name, strings.Join(Templates(), " or "))
}

// Remote is a vLLM or SGLang server that generates instead of the local
// engine.
type Remote struct {
	// Kind is RemoteVLLM or RemoteSGLang; "" means the local engine.
	Kind string
	// URL is the server's base URL, e.g. http://gpu-host:8000.
	URL string
	// Stream asks the server to stream tokens (legorl serve streams them
	// on to its clients). Defaults to false.
	Stream bool
}

// Metrics are the Prometheus metrics a Runtime's parts report to. Nil
// fields record nothing.
type Metrics struct {
	Engine  *engine.Metrics
	Proxy   *proxy.ServerMetrics
	Sandbox *sandbox.Metrics
}

// Options say what a Runtime is built from. Zero fields take the defaults
// in their comments.
type Options struct {
	// Policy is the checkpoint folder: config.json, model.safetensors,
	// tokenizer.json (with a remote engine, tokenizer.json, and config.json
	// for the context length when present). Required.
	Policy string
	// Version is the policy version the engine records. Negative: read it
	// from the checkpoint's header (policy/checkpoint; 0 without one).
	// Defaults to 0.
	Version int64
	// Remote, when its Kind is set, generates on a vLLM or SGLang server
	// instead of the local engine. Defaults to the local engine.
	Remote Remote
	// Generator, when set, generates instead of either engine: the
	// rollout audit's replay engine (policy/replay), which serves recorded
	// completions. Policy then only supplies tokenizer.json. Defaults to
	// nil.
	Generator proxy.Generator
	// Compute is the compute backend of the local engine's model
	// (policy/backend: cpu, or cuda in a binary built with -tags cuda),
	// Precision its matrix products' precision (fp32 or bf16). The
	// Runtime opens it and closes it. Defaults to "": the model's own CPU
	// backend.
	Compute, Precision string
	// Template is the chat template (Templates). Defaults to qwen3.
	Template string
	// ModelName is the model name in replies and the one sent to a
	// remote engine. Defaults to "" (the proxy's default).
	ModelName string
	// MaxTokens bounds a completion when a request sets no limit.
	// Defaults to 0: up to the context.
	MaxTokens int
	// Sampling is injected into every call (requests cannot change it).
	// Defaults to the zero Sampling: temperature 1, top-p 1, no top-k.
	Sampling infer.Sampling
	// Sandbox is the sandbox backend: SandboxLocal, SandboxDocker or
	// SandboxNone. Defaults to SandboxLocal.
	Sandbox string
	// Metrics are attached to the engine, proxy and sandbox backend.
	// Defaults to none.
	Metrics Metrics
	// Logger hears the proxy's warnings. Defaults to discarding them.
	Logger *slog.Logger
}

// Runtime is the rollout side assembled in one place: the policy (local
// engine or remote client) behind the proxy, the sandbox backend and the
// grader. legorl serve, legorl rollout, the Beam DoFns and the loop all
// build theirs with New; Close releases what New opened.
type Runtime struct {
	// Tokenizer is the policy's.
	Tokenizer *tokenizer.Tokenizer
	// Proxy serves the policy; Run opens a rollout on it per episode.
	Proxy *proxy.Proxy
	// Backend makes sandboxes; nil with SandboxNone.
	Backend sandbox.Backend
	// Grader grades diffs in fresh sandboxes of Backend; nil with
	// SandboxNone.
	Grader *grade.Grader
	// Version is the policy version the engine records.
	Version int64
	// Warnings are things about the policy a user should hear (a model
	// vocabulary larger than the tokenizer's).
	Warnings []string

	closers []func()
}

// Close closes the engine, the compute backend and the sandbox backend,
// in the reverse order of New.
func (r *Runtime) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// New builds a Runtime: checkpoint -> tokenizer, template, version ->
// local engine on the compute backend, or a remote engine -> proxy ->
// sandbox backend -> grader.
func New(ctx context.Context, o Options) (rt *Runtime, err error) {
	rt = &Runtime{}
	defer func() {
		if err != nil {
			rt.Close()
			rt = nil
		}
	}()
	if o.Template == "" {
		o.Template = "qwen3"
	}
	if o.Sandbox == "" {
		o.Sandbox = SandboxLocal
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tmpl, err := Template(o.Template)
	if err != nil {
		return rt, err
	}
	if o.Sandbox != SandboxLocal && o.Sandbox != SandboxDocker && o.Sandbox != SandboxNone {
		return rt, fmt.Errorf("%w: unknown sandbox backend %q: want %s or %s", ErrOptions, o.Sandbox, SandboxLocal, SandboxDocker)
	}
	rt.Version = o.Version
	if o.Version < 0 {
		if rt.Version, err = checkpoint.Version(o.Policy); err != nil {
			return rt, err
		}
	}
	// The local engine's weights first (config.json is what a folder that
	// is no checkpoint lacks), then the tokenizer.
	var m *model.Model
	if o.Remote.Kind == "" && o.Generator == nil {
		if m, err = model.Load(o.Policy); err != nil { // verifies the folder
			return rt, fmt.Errorf("rollout: policy %s: %w", o.Policy, err)
		}
	} else if o.Remote.Kind != "" {
		if _, err := checkpoint.Verify(o.Policy); err != nil { // the server loads the weights; its tokenizer is this folder's
			return rt, fmt.Errorf("rollout: policy %s: %w", o.Policy, err)
		}
	}
	rt.Tokenizer, err = tokenizer.Load(filepath.Join(o.Policy, "tokenizer.json"))
	if err != nil {
		return rt, fmt.Errorf("rollout: policy %s: %w", o.Policy, err)
	}
	gen, err := rt.policy(o, m)
	if err != nil {
		return rt, err
	}
	rt.Proxy, err = proxy.New(proxy.Options{Generator: gen, Tokenizer: rt.Tokenizer, Template: tmpl, ModelName: o.ModelName,
		Sampling: o.Sampling, MaxTokens: o.MaxTokens, Logger: o.Logger, ServerMetrics: o.Metrics.Proxy})
	if err != nil {
		return rt, err
	}
	if o.Sandbox == SandboxNone {
		return rt, nil
	}
	b, closeB, err := newBackend(ctx, o.Sandbox, o.Metrics.Sandbox)
	if err != nil {
		return rt, err
	}
	rt.Backend = b
	rt.closers = append(rt.closers, closeB)
	rt.Grader = grade.New(rt.Backend, grade.Options{})
	return rt, nil
}

// newBackend opens the sandbox backend kind (SandboxDocker, else local)
// and returns it with the func that closes it.
func newBackend(ctx context.Context, kind string, m *sandbox.Metrics) (sandbox.Backend, func(), error) {
	if kind == SandboxDocker {
		b, err := docker.New(ctx, docker.Options{Metrics: m})
		if err != nil {
			return nil, nil, err
		}
		return b, func() { b.Close() }, nil
	}
	b, err := local.Open(local.Options{Metrics: m})
	if err != nil {
		return nil, nil, err
	}
	return b, func() { b.Close() }, nil
}

// CheckGrading grades, in the sandbox backend kind (SandboxLocal, the
// default, or SandboxDocker) with the grader a Runtime uses, the gold patch
// of one instance per test runner of insts (grade.Grader.CheckEnvironment;
// suiteDir resolves their snapshots): a machine that cannot run a task's
// tests masks every rollout of it, and a run there would learn from
// nothing. The error says which runner failed and what it needs.
func CheckGrading(ctx context.Context, kind, suiteDir string, insts []tasks.Instance) error {
	if kind == "" {
		kind = SandboxLocal
	}
	if kind != SandboxLocal && kind != SandboxDocker {
		return fmt.Errorf("%w: unknown sandbox backend %q: want %s or %s", ErrOptions, kind, SandboxLocal, SandboxDocker)
	}
	b, closeB, err := newBackend(ctx, kind, nil)
	if err != nil {
		return err
	}
	defer closeB()
	return grade.New(b, grade.Options{}).CheckEnvironment(ctx, suiteDir, insts)
}

// policy builds the generator: the local engine over m on its compute
// backend, or a remote engine client.
func (rt *Runtime) policy(o Options, m *model.Model) (proxy.Generator, error) {
	if o.Generator != nil {
		return o.Generator, nil
	}
	switch o.Remote.Kind {
	case "":
		switch v, n := m.Config().VocabSize, rt.Tokenizer.VocabSize(); {
		case v > n: // real Qwen3 checkpoints pad their vocabulary
			rt.Warnings = append(rt.Warnings, fmt.Sprintf("the model's vocab_size %d pads past the tokenizer's %d ids: the engine samples only those (a remote server must too: docs/USAGE.md, Remote engines)", v, n))
		case v < n:
			rt.Warnings = append(rt.Warnings, fmt.Sprintf("the tokenizer's %d ids exceed the model's vocab_size %d: a prompt with an id past it is refused", n, v))
		}
		if o.Compute != "" {
			be, err := backend.Open(o.Compute, backend.Options{Precision: o.Precision})
			if err != nil {
				return nil, fmt.Errorf("%w: compute %s: %w", ErrOptions, o.Compute, err)
			}
			rt.closers = append(rt.closers, func() { be.Close() })
			m.SetBackend(be)
		}
		eng := engine.New(m, rt.Version, engine.Options{Metrics: o.Metrics.Engine})
		rt.closers = append(rt.closers, eng.Close)
		return eng, nil
	case RemoteVLLM, RemoteSGLang:
		if o.Remote.URL == "" {
			return nil, fmt.Errorf("%w: remote %s needs a URL", ErrOptions, o.Remote.Kind)
		}
		opt := remote.Options{Model: o.ModelName, VocabSize: rt.Tokenizer.VocabSize(), Version: rt.Version, Stream: o.Remote.Stream}
		if cfg, err := model.LoadConfig(filepath.Join(o.Policy, model.ConfigFile)); err == nil {
			opt.ContextLength = cfg.MaxPositionEmbeddings
		}
		if o.Remote.Kind == RemoteVLLM {
			return remote.NewVLLM(o.Remote.URL, opt)
		}
		return remote.NewSGLang(o.Remote.URL, opt)
	}
	return nil, fmt.Errorf("%w: unknown remote engine %q: want %s or %s", ErrOptions, o.Remote.Kind, RemoteVLLM, RemoteSGLang)
}
