package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/legorl/legorl/monitor"
	"github.com/legorl/legorl/storage"
)

// runMonitor is `legorl monitor`: the dashboard of a store's runs, served
// until SIGINT or SIGTERM.
func runMonitor(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("monitor", stderr)
	var sf storeFlags
	sf.register(fs, env)
	addr := fs.String("addr", "127.0.0.1:8321", "address to serve on, host:port (port 0 picks a free one)")
	run := fs.String("run", "", "serve this run only (it need not exist yet); default every run of the store")
	poll := fs.Duration("poll", 2*time.Second, "how often to look for new manifest versions while a page is open")
	ckpts := fs.String("checkpoints", "", "folder holding the trainer's checkpoint folders (lineage.json, recomputed_logprobs.safetensors): the logprob scatter")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *run != "" {
		if err := storage.CheckName("run id", *run); err != nil {
			return err
		}
	}
	if *poll < 100*time.Millisecond {
		return fmt.Errorf("--poll must be at least 100ms")
	}
	st, err := sf.open(ctx, env, false)
	if err != nil {
		return err
	}
	opts := monitor.Options{Run: *run, Poll: *poll}
	if *ckpts != "" {
		fi, err := os.Stat(*ckpts)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("--checkpoints %s: not a folder", *ckpts)
		}
		opts.Recomputed = &monitor.CheckpointFolders{Root: *ckpts}
	}
	m, err := monitor.New(st, opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/"
	if *run != "" {
		url += "runs/" + *run
	}
	fmt.Fprintf(stdout, "legorl monitor: serving %s at %s (Ctrl-C stops)\n", st.URI(), url)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-done
	fmt.Fprintln(stdout, "legorl monitor: stopped")
	return nil
}
