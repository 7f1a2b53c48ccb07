package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/container/tools"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal/extworker"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
)

// The pieces of a distributed run on one machine or many: a job server
// (ServeJobServer, Prism in its own process), SDK workers in processes of
// their own, either a worker pool that the job server asks for workers
// (ServeWorkerPool; environment EXTERNAL with the pool's endpoint) or one
// process per worker that the job server starts itself (ProcessWorker;
// environment PROCESS with {"command": "/path/to/legorl"}), and the
// launcher (Run with the universal runner). The workers must be this
// binary: Beam Go workers run the DoFns registered in it.

// ServeJobServer starts a Prism job server in this process on port (0:
// any), bound to the loopback device like the in-process one, and returns
// its endpoint. It serves until the process ends.
func ServeJobServer(ctx context.Context, port int) (string, error) {
	Init()
	return startPrismOn(ctx, port)
}

// ServeWorkerPool starts an SDK worker pool in this process on localhost
// at port (0: any): the job server starts workers in it (environment
// EXTERNAL, config: the returned endpoint), each a goroutine of this
// process. stop ends it and its workers.
func ServeWorkerPool(ctx context.Context, port int) (endpoint string, stop func(), err error) {
	Init()
	pool, err := extworker.StartLoopback(ctx, port)
	if err != nil {
		return "", nil, fmt.Errorf("runner: worker pool: %w", err)
	}
	return pool.EnvironmentConfig(ctx), func() { pool.Stop(context.Background()) }, nil
}

// IsProcessWorker reports whether args are those a job server starts a
// PROCESS environment's command with (--id=..., --provision_endpoint=...).
func IsProcessWorker(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--provision_endpoint=") || strings.HasPrefix(a, "-provision_endpoint=") {
			return true
		}
	}
	return false
}

// ProcessWorker runs one SDK worker until the job server ends it: args
// are what the job server passed (--id, --provision_endpoint); the worker
// asks the provision service for its control and logging endpoints.
func ProcessWorker(ctx context.Context, args []string) error {
	Init()
	var id, endpoint string
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		v = strings.Trim(v, `'"`)
		switch k {
		case "id":
			id = v
		case "provision_endpoint":
			endpoint = v
		}
	}
	if id == "" || endpoint == "" {
		return fmt.Errorf("%w: a worker needs --id and --provision_endpoint, got %q", ErrOptions, args)
	}
	ctx = grpcx.WriteWorkerID(ctx, id)
	info, err := tools.ProvisionInfo(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("runner: worker %s: provision: %w", id, err)
	}
	return harness.MainWithOptions(ctx, info.GetLoggingEndpoint().GetUrl(), info.GetControlEndpoint().GetUrl(),
		harness.Options{StatusEndpoint: info.GetStatusEndpoint().GetUrl(), RunnerCapabilities: info.GetRunnerCapabilities()})
}
