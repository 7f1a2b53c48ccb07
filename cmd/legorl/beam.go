package main

import (
	"context"
	"fmt"
	"io"

	"github.com/legorl/legorl/pipelines/runner"
	"github.com/legorl/legorl/proxy/listen"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/transforms"
)

// runBeam is `legorl beam job-server|worker-pool`: the processes of a
// pipeline run spread over processes (or machines): a Prism job server,
// and a pool of SDK workers. `legorl rollout --runner universal --endpoint
// JOB_SERVER --environment-type EXTERNAL --environment-config WORKER_POOL`
// then runs the rollout pipeline on them. A job server may also start
// workers itself: --environment-type PROCESS --environment-config
// '{"command": "/path/to/legorl"}' (legorl runs as a worker when started
// with --provision_endpoint; see beamWorker).
func runBeam(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, "usage: legorl beam job-server|worker-pool [--port N | --listen HOST:PORT [--expose]] [--job-server HOST:PORT]")
		fmt.Fprintln(stdout, "\n  job-server   a Prism job server (bound to loopback unless --listen --expose) for --runner universal --endpoint")
		fmt.Fprintln(stdout, "  worker-pool  SDK workers for --environment-type EXTERNAL --environment-config")
		if len(args) == 0 {
			return fmt.Errorf("missing subcommand: want job-server or worker-pool")
		}
		return nil
	}
	sub := args[0]
	fs := newFlags("beam "+sub, stderr)
	port := fs.Int("port", 0, "shorthand for --listen 127.0.0.1:PORT")
	addr := fs.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free one); beyond loopback only with --expose")
	expose := fs.Bool("expose", false, "allow a --listen address other than loopback (other machines can reach it)")
	jobServer := fs.String("job-server", "", "worker-pool: the job server HOST:PORT when it runs on another machine")
	if err := parseFlags(fs, stderr, args[1:]); err != nil {
		return err
	}
	if *port != 0 {
		*addr = fmt.Sprintf("127.0.0.1:%d", *port)
	}
	la, err := listen.Parse(*addr, *expose, "--listen", "--expose")
	if err != nil {
		return err
	}
	switch sub {
	case "job-server":
		ep, err := runner.ServeJobServer(ctx, la)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "legorl beam: job server at %s\n", ep)
		fmt.Fprint(stderr, la.Exposure("the Prism job service", ep, "anyone who reaches it can submit jobs, and jobs run code"))
	case "worker-pool":
		setWorkerStore(env)
		ep, stop, err := runner.ServeWorkerPool(ctx, la, *jobServer)
		if err != nil {
			return err
		}
		defer stop()
		defer transforms.CloseRuntimes()
		fmt.Fprintf(stdout, "legorl beam: worker pool at %s\n", ep)
		fmt.Fprint(stderr, la.Exposure("the SDK worker pool", ep, "any job server that reaches it runs its bundles here"))
	default:
		return fmt.Errorf("unknown subcommand %q (see legorl beam -h)", sub)
	}
	<-ctx.Done()
	return nil
}

// setWorkerStore gives this process's DoFns the store credentials from
// the environment.
func setWorkerStore(env *environ) {
	transforms.SetStoreOptions(storage.Options{AccessKey: env.AccessKey, SecretKey: env.SecretKey, SessionToken: env.Session, Region: env.Region})
}

// beamWorker runs legorl as one SDK worker when a job server started it
// for a PROCESS environment (its arguments then are --id=... and
// --provision_endpoint=..., no subcommand); handled is false otherwise.
func beamWorker(ctx context.Context, env *environ, args []string, stderr io.Writer) (code int, handled bool) {
	if !runner.IsProcessWorker(args) {
		return 0, false
	}
	setWorkerStore(env)
	defer transforms.CloseRuntimes()
	if err := runner.ProcessWorker(ctx, args); err != nil {
		fmt.Fprintf(stderr, "legorl worker: %s\n", oneLine(err.Error()))
		return 2, true
	}
	return 0, true
}
