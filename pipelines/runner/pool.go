package runner

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/apache/beam/sdks/v2/go/container/tools"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"

	"github.com/legorl/legorl/proxy/listen"
)

// pool is an SDK worker pool (Beam's ExternalWorkerPool service): the job
// server asks it to start workers, each a goroutine of this process. It is
// Beam's extworker.Loopback at an address of the caller's choice (Loopback
// listens on localhost only).
type pool struct {
	fnpb.UnimplementedBeamFnExternalWorkerPoolServer

	lis    net.Listener
	srv    *grpc.Server
	root   context.Context
	cancel context.CancelFunc
	host   string // the host of the endpoint to give the job server

	mu      sync.Mutex
	workers map[string]context.CancelFunc // nil once stopped
}

// startPool starts a pool listening at addr.
func startPool(ctx context.Context, addr listen.Address) (*pool, error) {
	lis, err := net.Listen("tcp", addr.String())
	if err != nil {
		return nil, err
	}
	root, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &pool{lis: lis, srv: grpc.NewServer(), root: root, cancel: cancel,
		host: addr.IP.String(), workers: map[string]context.CancelFunc{}}
	if addr.Loopback() {
		p.host = "localhost"
	}
	fnpb.RegisterBeamFnExternalWorkerPoolServer(p.srv, p)
	go p.srv.Serve(lis)
	return p, nil
}

// endpoint is the environment config to give the job server: HOST:PORT
// (localhost for loopback; for every interface, 0.0.0.0, which the job
// server must replace by an address of this machine it can reach).
func (p *pool) endpoint() string {
	return net.JoinHostPort(p.host, strconv.Itoa(p.lis.Addr().(*net.TCPAddr).Port))
}

// StartWorker starts a worker harness that connects to the request's
// control and logging endpoints.
func (p *pool) StartWorker(ctx context.Context, req *fnpb.StartWorkerRequest) (*fnpb.StartWorkerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := req.GetWorkerId()
	switch {
	case p.workers == nil:
		return &fnpb.StartWorkerResponse{Error: "worker pool shutting down"}, nil
	case p.workers[id] != nil:
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("worker with ID %q already exists", id)}, nil
	case req.GetControlEndpoint() == nil || req.GetLoggingEndpoint() == nil:
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("worker %q: missing control or logging endpoint", id)}, nil
	case req.GetControlEndpoint().Authentication != nil || req.GetLoggingEndpoint().Authentication != nil:
		return &fnpb.StartWorkerResponse{Error: "secure endpoints are not supported"}, nil
	}
	wctx, cancel := context.WithCancel(grpcx.WriteWorkerID(p.root, id))
	p.workers[id] = cancel
	var opts harness.Options
	if ep := req.GetProvisionEndpoint().GetUrl(); ep != "" {
		if info, err := tools.ProvisionInfo(wctx, ep); err == nil {
			opts = harness.Options{StatusEndpoint: info.GetStatusEndpoint().GetUrl(), RunnerCapabilities: info.GetRunnerCapabilities()}
		}
	}
	go harness.MainWithOptions(wctx, req.GetLoggingEndpoint().GetUrl(), req.GetControlEndpoint().GetUrl(), opts)
	return &fnpb.StartWorkerResponse{}, nil
}

// StopWorker ends a worker harness.
func (p *pool) StopWorker(ctx context.Context, req *fnpb.StopWorkerRequest) (*fnpb.StopWorkerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workers == nil {
		return &fnpb.StopWorkerResponse{}, nil
	}
	cancel, ok := p.workers[req.GetWorkerId()]
	if !ok {
		return &fnpb.StopWorkerResponse{Error: fmt.Sprintf("no worker with id %q running", req.GetWorkerId())}, nil
	}
	cancel()
	delete(p.workers, req.GetWorkerId())
	return &fnpb.StopWorkerResponse{}, nil
}

// stop ends the pool and its workers.
func (p *pool) stop() {
	p.mu.Lock()
	p.workers = nil
	p.cancel()
	p.mu.Unlock()
	// GracefulStop waits for running calls, so it runs outside the lock
	// that StopWorker takes.
	p.srv.GracefulStop()
}
