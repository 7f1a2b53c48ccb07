package transforms

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/legorl/legorl/policy/chat"
	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/policy/model"
	"github.com/legorl/legorl/policy/remote"
	"github.com/legorl/legorl/policy/tokenizer"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/docker"
	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/storage"
)

// runtime is what the rollout DoFns of one worker process share: the
// policy (one engine, so concurrent rollouts batch together), the proxy
// over it, the sandbox backend and grader, and the bound on rollouts
// running at once.
type runtime struct {
	tok     *tokenizer.Tokenizer
	proxy   *proxy.Proxy
	backend sandbox.Backend
	grader  *grade.Grader
	slots   chan struct{}
	admit   sync.Mutex // held by a group while it takes its slots
	closers []func()
	met     RuntimeMetrics // what this process attached when it was built
}

func (r *runtime) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// registry holds the runtimes of this process, keyed by what builds them:
// checkpoint folder + version, template and completion limit, remote
// engine, sandbox backend. The bound on rollouts at once (Parallel) is the
// first acquirer's.
//
// It is the one piece of process-level state in the package, and it has to
// be: Beam makes a DoFn instance per bundle processor (several per worker,
// one per concurrent bundle and per stage), so DoFns can share an engine
// only through the process. Each DoFn takes a reference in Setup and drops
// it in Teardown; the last one out closes the runtime, and CloseRuntimes
// closes whatever a runner never tore down.
type registry struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	refs  int
	ready chan struct{} // closed once rt/err are set
	rt    *runtime
	err   error
}

var runtimes = &registry{m: map[string]*entry{}}

// built counts the runtimes this process built.
var built atomic.Int64

// RuntimesBuilt returns how many runtimes (engine, proxy, backend)
// the DoFns of this process have built: 0 in a launcher whose pipeline
// ran on workers in other processes.
func RuntimesBuilt() int { return int(built.Load()) }

// storeOptions are the S3 credentials of this process (SetStoreOptions).
var storeOptions struct {
	mu  sync.Mutex
	opt storage.Options
}

// SetStoreOptions sets the S3 credentials and region the DoFns of this
// process open stores with (the endpoint comes from Config). The CLI calls
// it with what it read from the environment, in the launcher and in worker
// processes alike; credentials never travel inside the pipeline.
func SetStoreOptions(opt storage.Options) {
	storeOptions.mu.Lock()
	storeOptions.opt = opt
	storeOptions.mu.Unlock()
}

// runtimeKey is the registry key of a config.
func (c Config) runtimeKey() string {
	return fmt.Sprintf("%s@%d|%s|%d|%s|%s|%s", c.Policy, c.PolicyVersion, c.Template, c.MaxTokens,
		c.RemoteKind, c.RemoteURL, c.Backend)
}

// acquire returns the runtime of cfg, building it the first time; every
// caller must release it.
func (g *registry) acquire(ctx context.Context, cfg Config) (*runtime, error) {
	key := cfg.runtimeKey()
	g.mu.Lock()
	e, ok := g.m[key]
	if !ok {
		e = &entry{ready: make(chan struct{})}
		g.m[key] = e
		go func() { // not under the caller's ctx: other DoFns wait for it too
			e.rt, e.err = newRuntime(context.WithoutCancel(ctx), cfg)
			close(e.ready)
		}()
	}
	e.refs++
	g.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		g.release(cfg)
		return nil, ctx.Err()
	}
	if e.err != nil {
		g.release(cfg)
		return nil, e.err
	}
	return e.rt, nil
}

// release drops a reference; the last one closes the runtime.
func (g *registry) release(cfg Config) {
	key := cfg.runtimeKey()
	g.mu.Lock()
	e, ok := g.m[key]
	if !ok {
		g.mu.Unlock()
		return
	}
	e.refs--
	last := e.refs == 0
	if last {
		delete(g.m, key)
	}
	g.mu.Unlock()
	if last {
		go func() {
			<-e.ready
			if e.rt != nil {
				e.rt.close()
			}
		}()
	}
}

// closeAll closes every runtime, referenced or not.
func (g *registry) closeAll() {
	g.mu.Lock()
	es := g.m
	g.m = map[string]*entry{}
	g.mu.Unlock()
	for _, e := range es {
		<-e.ready
		if e.rt != nil {
			e.rt.close()
		}
	}
}

// CloseRuntimes closes the engines, backends and stores the DoFns of this
// process loaded. A launcher that ran a pipeline in process (Prism,
// loopback) calls it when the pipeline is done: runners do not always tear
// DoFns down, and the local sandbox backend has a helper process to end.
func CloseRuntimes() { runtimes.closeAll() }

func templateByName(name string) (proxy.Template, error) {
	switch name {
	case "qwen3":
		return chat.Qwen3{}, nil
	case "qwen3-coder":
		return chat.Qwen3Coder{}, nil
	}
	return nil, fmt.Errorf("%w: unknown template %q: want qwen3 or qwen3-coder", ErrConfig, name)
}

func newRuntime(ctx context.Context, cfg Config) (rt *runtime, err error) {
	rt = &runtime{slots: make(chan struct{}, cfg.Parallel), met: currentRuntimeMetrics()}
	defer func() {
		if err != nil {
			rt.close()
			rt = nil
		}
	}()
	tmpl, err := templateByName(cfg.Template)
	if err != nil {
		return rt, err
	}
	rt.tok, err = tokenizer.Load(filepath.Join(cfg.Policy, "tokenizer.json"))
	if err != nil {
		return rt, fmt.Errorf("transforms: policy %s: %w", cfg.Policy, err)
	}
	var gen proxy.Generator
	switch cfg.RemoteKind {
	case "":
		m, err := model.Load(cfg.Policy)
		if err != nil {
			return rt, fmt.Errorf("transforms: policy %s: %w", cfg.Policy, err)
		}
		eng := engine.New(m, cfg.PolicyVersion, engine.Options{Metrics: rt.met.Engine})
		rt.closers = append(rt.closers, eng.Close)
		gen = eng
	default:
		opt := remote.Options{VocabSize: rt.tok.VocabSize(), Version: cfg.PolicyVersion}
		var e *remote.Engine
		if cfg.RemoteKind == "vllm" {
			e, err = remote.NewVLLM(cfg.RemoteURL, opt)
		} else {
			e, err = remote.NewSGLang(cfg.RemoteURL, opt)
		}
		if err != nil {
			return rt, err
		}
		gen = e
	}
	rt.proxy, err = proxy.New(proxy.Options{Generator: gen, Tokenizer: rt.tok, Template: tmpl, MaxTokens: cfg.MaxTokens,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ServerMetrics: rt.met.Proxy})
	if err != nil {
		return rt, err
	}
	switch cfg.Backend {
	case "docker":
		b, err := docker.New(ctx, docker.Options{Metrics: rt.met.Sandbox})
		if err != nil {
			return rt, err
		}
		rt.backend = b
		rt.closers = append(rt.closers, func() { b.Close() })
	default:
		b := local.New(local.Options{Metrics: rt.met.Sandbox})
		rt.backend = b
		rt.closers = append(rt.closers, func() { b.Close() })
	}
	rt.grader = grade.New(rt.backend, grade.Options{})
	built.Add(1)
	return rt, nil
}

// OpenStore opens cfg's store with this process's credentials
// (SetStoreOptions).
func OpenStore(ctx context.Context, cfg Config) (storage.Store, error) {
	return storage.Open(ctx, cfg.Store, currentStoreOptions(cfg))
}
