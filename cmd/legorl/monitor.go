package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legorl/legorl/monitor"
	"github.com/legorl/legorl/policy/safetensors"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/trainer"
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
		opts.Recomputed = &checkpointRecomputed{root: *ckpts}
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

// checkpointRecomputed finds the trainer's recomputed logprobs under a
// folder: every checkpoint folder (up to three levels down) whose
// lineage.json names the run and iteration; the newest one wins when an
// iteration was trained more than once.
type checkpointRecomputed struct {
	root string

	mu    sync.Mutex
	cache map[string]*monitor.Recomputed // by recomputed file path and mtime
}

func (c *checkpointRecomputed) Recomputed(ctx context.Context, runID string, iteration int) (*monitor.Recomputed, error) {
	type found struct {
		dir string
		at  time.Time
	}
	var hits []found
	err := filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable folder holds no checkpoint we can use
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(c.root, p); strings.Count(rel, string(filepath.Separator)) >= 3 {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() != trainer.LineageFile {
			return nil
		}
		lin, err := trainer.ReadLineage(filepath.Dir(p))
		if err != nil || lin == nil || lin.RunID != runID || lin.Iteration != iteration {
			return nil
		}
		hits = append(hits, found{filepath.Dir(p), lin.CreatedAt})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(hits) == 0 {
		return nil, fmt.Errorf("%w: no checkpoint under %s has a lineage of run %s iteration %d", monitor.ErrNoRecomputed, c.root, runID, iteration)
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].at.After(hits[j].at) })
	path := filepath.Join(hits[0].dir, trainer.RecomputedFile)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s has no %s", monitor.ErrNoRecomputed, hits[0].dir, trainer.RecomputedFile)
	}
	key := path + "@" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
	c.mu.Lock()
	if r := c.cache[key]; r != nil {
		c.mu.Unlock()
		return r, nil
	}
	c.mu.Unlock()
	set, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", monitor.ErrNoRecomputed, err)
	}
	out := &monitor.Recomputed{Source: hits[0].dir, Logprobs: map[monitor.SegmentRef][]float32{}}
	for _, name := range set.Names() {
		i := strings.LastIndexByte(name, '/')
		seg, err := strconv.ParseInt(name[i+1:], 10, 32)
		if i < 0 || err != nil {
			continue
		}
		info, _ := set.Info(name)
		v, err := set.Float32(name, info.Shape)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", monitor.ErrNoRecomputed, path, err)
		}
		out.Logprobs[monitor.SegmentRef{RolloutID: name[:i], Segment: int32(seg)}] = v
	}
	c.mu.Lock()
	if c.cache == nil {
		c.cache = map[string]*monitor.Recomputed{}
	}
	c.cache[key] = out
	c.mu.Unlock()
	return out, nil
}

var _ monitor.RecomputedSource = (*checkpointRecomputed)(nil)
