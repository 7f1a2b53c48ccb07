package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/legorl/legorl/policy/engine"
	"github.com/legorl/legorl/proxy"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/trainer"
	"github.com/legorl/legorl/transforms"
)

// Prometheus metrics (docs/METRICS.md). Nothing here is global: a command
// makes a registry (newRegistry), the metrics of the packages it runs on it
// (each package's NewMetrics, or newMetrics for all of them), passes them
// in the packages' options, and serves the registry: on its own HTTP
// server (serve), or at --metrics-addr (serveMetrics).

// metricSet is the metrics of every instrumented package on one registry,
// for a command that runs them all (rollouts, then training): the rollout
// runtime's (pipeline, engine, proxy, sandbox; pass them to
// transforms.SetRuntimeMetrics, or their fields to the packages' options)
// and the trainer's (trainer.Options.Metrics).
type metricSet struct {
	transforms.RuntimeMetrics
	Trainer *trainer.Metrics
}

// newRegistry returns a registry holding the Go runtime's and the
// process's collectors (go_*, process_*), for the package metrics to join.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// newMetrics registers every instrumented package's metrics on reg. Each
// metric name can be registered once per registry, so call it once.
func newMetrics(reg prometheus.Registerer) *metricSet {
	return &metricSet{RuntimeMetrics: newRuntimeMetrics(reg), Trainer: trainer.NewMetrics(reg)}
}

// newRuntimeMetrics registers the rollout side's metrics on reg: the
// pipeline's, the engine's, the proxy's and the sandbox backends'.
func newRuntimeMetrics(reg prometheus.Registerer) transforms.RuntimeMetrics {
	return transforms.RuntimeMetrics{
		Pipeline: transforms.NewMetrics(reg),
		Engine:   engine.NewMetrics(reg),
		Proxy:    proxy.NewServerMetrics(reg),
		Sandbox:  sandbox.NewMetrics(reg),
	}
}

// metricsHandler serves reg in the Prometheus text (or protobuf) format.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// serveMetrics serves reg at http://ADDR/metrics, ADDR being addr as
// bound (a port 0 gets a free port), until ctx ends or stop is called;
// stop waits for the server to end and may be called more than once. A
// bad or busy address is a one-line error.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(l) // ends with Close; scrapes failing is all a broken listener costs
	}()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-served
		})
	}
	return "http://" + l.Addr().String() + "/metrics", stop, nil
}

// startMetrics serves reg at addr for command name when addr is not empty,
// and says where on w; stop is never nil. The error names the flag.
func startMetrics(ctx context.Context, name, addr string, reg *prometheus.Registry, w io.Writer) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	url, stop, err := serveMetrics(ctx, addr, reg)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	fmt.Fprintf(w, "legorl %s: metrics at %s\n", name, url)
	return stop, nil
}
