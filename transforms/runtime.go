package transforms

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/legorl/legorl/policy/infer"
	"github.com/legorl/legorl/rollout"
	"github.com/legorl/legorl/storage"
)

// runtime is what the rollout DoFns of one worker process share: the
// policy (one engine, so concurrent rollouts batch together), the proxy
// over it, the sandbox backend and grader, and the bound on rollouts
// running at once.
type runtime struct {
	*rollout.Runtime
	slots chan struct{}
	admit sync.Mutex     // held by a group while it takes its slots
	met   RuntimeMetrics // what this process attached when it was built
}

func (r *runtime) close() {
	if r.Runtime != nil {
		r.Runtime.Close()
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
	return fmt.Sprintf("%s@%d|%s|%d|%s|%s|%s|%s|%s|k%d", c.Policy, c.PolicyVersion, c.Template, c.MaxTokens,
		c.RemoteKind, c.RemoteURL, c.Backend, c.Compute, c.Precision, c.TopK)
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

// newRuntime builds the runtime of cfg with rollout.New, the one place a
// rollout runtime is assembled, and this process's metrics.
func newRuntime(ctx context.Context, cfg Config) (*runtime, error) {
	met := currentRuntimeMetrics()
	rt, err := rollout.New(ctx, rollout.Options{Policy: cfg.Policy, Version: cfg.PolicyVersion,
		Remote:  rollout.Remote{Kind: cfg.RemoteKind, URL: cfg.RemoteURL},
		Compute: cfg.Compute, Precision: cfg.Precision, Template: cfg.Template, MaxTokens: cfg.MaxTokens,
		Sampling: infer.Sampling{Temperature: 1, TopP: 1, TopK: cfg.TopK},
		Sandbox:  cfg.Backend, Metrics: rollout.Metrics{Engine: met.Engine, Proxy: met.Proxy, Sandbox: met.Sandbox}})
	if err != nil {
		if errors.Is(err, rollout.ErrOptions) {
			err = fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return nil, err
	}
	built.Add(1)
	return &runtime{Runtime: rt, slots: make(chan struct{}, cfg.Parallel), met: met}, nil
}

// OpenStore opens cfg's store with this process's credentials
// (SetStoreOptions).
func OpenStore(ctx context.Context, cfg Config) (storage.Store, error) {
	return storage.Open(ctx, cfg.Store, currentStoreOptions(cfg))
}
