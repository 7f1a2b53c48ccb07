// Package runner runs a Beam pipeline: on Prism in this process by default
// (its job service bound to the loopback interface), on a portable job
// server (Flink, Spark, a Prism of its own) with "universal", or on the
// direct runner (unit tests).
//
// The Go SDK keeps its runner settings in global flags (endpoint,
// environment_type, ...); Run sets them for the run and is serialized, so
// one process runs one pipeline at a time.
package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

// Runner names.
const (
	Prism     = "prism"     // Prism in this process, loopback workers (the default)
	Universal = "universal" // a portable job server at Options.Endpoint
	Direct    = "direct"    // the direct runner: in process, for tests
)

// ErrOptions: options that name no runner, lack an endpoint, or set an
// unknown Beam flag.
var ErrOptions = errors.New("runner: bad options")

// Options choose the runner.
type Options struct {
	// Runner is prism, universal or direct. Defaults to prism.
	Runner string
	// Endpoint is the job server, HOST:PORT (universal only; required
	// there).
	Endpoint string
	// EnvironmentType is how the job server starts SDK workers: LOOPBACK
	// (workers in this process), PROCESS (a command it runs, with
	// EnvironmentConfig {"command": "/path/to/legorl"}), EXTERNAL (a worker
	// pool at EnvironmentConfig) or DOCKER. Defaults to LOOPBACK for prism
	// and to the job server's choice for universal.
	EnvironmentType   string
	EnvironmentConfig string
	// JobName names the job on the job server. Defaults to Beam's.
	JobName string
	// Flags are other Beam flags passed through, name to value (e.g.
	// "parallelism": "4", "experiments": "..."). Defaults to none.
	Flags map[string]string
}

var (
	mu       sync.Mutex
	initOnce sync.Once
)

// Init initializes the Beam SDK once per process (beam.Init). Run calls
// it; a main that builds pipelines itself calls it first. Beam's logging
// (and so Prism's, through log/slog's default logger) is set to warnings
// and errors on stderr.
func Init() {
	initOnce.Do(func() {
		beamlog.LogLevel = "warn"
		beam.Init()
	})
}

// Run runs the pipeline to its end and returns its error, shortened to
// its last cause (runners report the whole chain of bundle, plan and DoFn
// messages; errors.Unwrap gives the runner's).
func Run(ctx context.Context, p *beam.Pipeline, opt Options) (beam.PipelineResult, error) {
	res, err := run(ctx, p, opt)
	if err != nil {
		err = rootCause(err)
	}
	return res, err
}

// RunNew initializes Beam (Init), builds a new pipeline with build on its
// root scope and runs it to its end (Run). The error names the pipeline:
// "NAME pipeline: cause". The pipelines' own Run functions start here.
func RunNew(ctx context.Context, opt Options, name string, build func(s beam.Scope)) error {
	Init()
	p, s := beam.NewPipelineWithRoot()
	build(s)
	if _, err := Run(ctx, p, opt); err != nil {
		return fmt.Errorf("%s pipeline: %w", name, err)
	}
	return nil
}

// rootCause shortens a failed job's error to its last cause.
func rootCause(err error) error {
	msg := err.Error()
	i := strings.LastIndex(msg, "caused by:")
	if i < 0 {
		return err
	}
	last := strings.TrimSpace(msg[i+len("caused by:"):])
	if j := strings.Index(last, "] failed:"); j >= 0 && strings.HasPrefix(last, "DoFn[") {
		last = strings.TrimSpace(last[j+len("] failed:"):])
	}
	return &causeError{msg: "job failed: " + last, err: err}
}

// causeError shows the last cause and unwraps to the runner's error.
type causeError struct {
	msg string
	err error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.err }

func run(ctx context.Context, p *beam.Pipeline, opt Options) (beam.PipelineResult, error) {
	Init()
	mu.Lock()
	defer mu.Unlock()
	name := opt.Runner
	if name == "" {
		name = Prism
	}
	restore, err := setFlags(opt)
	if err != nil {
		return nil, err
	}
	defer restore()
	switch name {
	case Direct:
		return direct.Execute(ctx, p)
	case Prism:
		if opt.Endpoint != "" {
			return nil, fmt.Errorf("%w: prism runs in this process; use --runner universal for a job server at %s", ErrOptions, opt.Endpoint)
		}
		ep, err := startPrism(ctx)
		if err != nil {
			return nil, err
		}
		*jobopts.Endpoint = ep
		if *jobopts.EnvironmentType == "" {
			*jobopts.EnvironmentType = "loopback"
		}
		return universal.Execute(ctx, p)
	case Universal:
		if opt.Endpoint == "" {
			return nil, fmt.Errorf("%w: the universal runner needs --endpoint HOST:PORT", ErrOptions)
		}
		*jobopts.Endpoint = opt.Endpoint
		if host, _, err := net.SplitHostPort(opt.Endpoint); err == nil && !isLoopback(host) {
			// A Prism elsewhere names its staging endpoint localhost:PORT.
			stop, err := StartRelay(ctx, opt.Endpoint)
			if err != nil {
				return nil, err
			}
			defer stop()
		}
		if env := strings.ToLower(*jobopts.EnvironmentType); *jobopts.WorkerBinary == "" && (env == "external" || env == "process") {
			// The SDK would upload this binary (about 150 MB) for workers
			// to run; legorl's workers are legorl already installed where
			// they run (EXTERNAL pools, PROCESS commands), so an empty
			// artifact stands in for it.
			f, err := os.CreateTemp("", "legorl-worker-*")
			if err != nil {
				return nil, err
			}
			f.Close()
			defer os.Remove(f.Name())
			*jobopts.WorkerBinary = f.Name()
			defer func() { *jobopts.WorkerBinary = "" }()
		}
		return universal.Execute(ctx, p)
	default:
		return nil, fmt.Errorf("%w: unknown runner %q: want prism, universal or direct", ErrOptions, name)
	}
}

// setFlags sets the Beam flags of opt and returns what restores them.
func setFlags(opt Options) (func(), error) {
	set := map[string]string{}
	for k, v := range opt.Flags {
		set[k] = v
	}
	for k, v := range map[string]string{"environment_type": opt.EnvironmentType, "environment_config": opt.EnvironmentConfig, "job_name": opt.JobName} {
		if v != "" {
			set[k] = v
		}
	}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	oldEnv := *jobopts.EnvironmentType
	undo := []func(){func() { *jobopts.EnvironmentType = oldEnv }}
	restore := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		*jobopts.Endpoint = ""
	}
	for _, k := range names {
		f := flag.CommandLine.Lookup(k)
		if f == nil || strings.HasPrefix(k, "test.") || k == "worker" {
			restore()
			return nil, fmt.Errorf("%w: unknown Beam flag %q", ErrOptions, k)
		}
		old := f.Value.String()
		if err := f.Value.Set(set[k]); err != nil {
			restore()
			return nil, fmt.Errorf("%w: Beam flag %s=%q: %v", ErrOptions, k, set[k], err)
		}
		undo = append(undo, func() { f.Value.Set(old) })
	}
	return restore, nil
}

// isLoopback reports whether host (a name or an IP) is this machine's
// loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
