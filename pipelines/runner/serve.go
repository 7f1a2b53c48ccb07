package runner

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/apache/beam/sdks/v2/go/container/tools"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"

	"github.com/legorl/legorl/proxy/listen"
)

// The pieces of a distributed run on one machine or many: a job server
// (ServeJobServer, Prism in its own process), SDK workers in processes of
// their own, either a worker pool that the job server asks for workers
// (ServeWorkerPool; environment EXTERNAL with the pool's endpoint) or one
// process per worker that the job server starts itself (ProcessWorker;
// environment PROCESS with {"command": "/path/to/legorl"}), and the
// launcher (Run with the universal runner). The workers must be this
// binary: Beam Go workers run the DoFns registered in it.

// ServeJobServer starts a Prism job server in this process at addr and
// returns its endpoint. Prism listens on every interface and cannot be
// told otherwise, so its listener is bound to the device that holds
// addr's IP (lo for loopback, the default; none for every interface,
// 0.0.0.0): connections that arrive on other devices are refused. Bound
// to a device other than lo, it is reachable only from other machines
// (local connections arrive on lo). Prism names its endpoints
// localhost:PORT to the launcher and the workers, so elsewhere they reach
// it through a relay at localhost (StartRelay; ServeWorkerPool and the
// universal runner start one). It serves until the process ends.
func ServeJobServer(ctx context.Context, addr listen.Address) (string, error) {
	Init()
	dev, err := addr.Interface()
	if err != nil {
		return "", fmt.Errorf("runner: job server: %w", err)
	}
	ep, err := startPrismOn(ctx, addr.Port, dev)
	if err != nil || addr.Loopback() {
		return ep, err
	}
	_, port, _ := net.SplitHostPort(ep)
	return net.JoinHostPort(addr.IP.String(), port), nil
}

// ServeWorkerPool starts an SDK worker pool in this process at addr: the
// job server starts workers in it (environment EXTERNAL, config: the
// returned endpoint), each a goroutine of this process. When jobServer
// (HOST:PORT) is another machine's job server, a relay at localhost:PORT
// carries the workers' connections to it (see ServeJobServer). stop ends
// the pool, its workers and the relay.
func ServeWorkerPool(ctx context.Context, addr listen.Address, jobServer string) (endpoint string, stop func(), err error) {
	Init()
	stopRelay := func() {}
	if jobServer != "" {
		if stopRelay, err = StartRelay(ctx, jobServer); err != nil {
			return "", nil, fmt.Errorf("runner: worker pool: %w", err)
		}
	}
	pool, err := startPool(ctx, addr)
	if err != nil {
		stopRelay()
		return "", nil, fmt.Errorf("runner: worker pool: %w", err)
	}
	return pool.endpoint(), func() { pool.stop(); stopRelay() }, nil
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
