package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/legorl/legorl/sandbox"
)

// BenchmarkCreateExecClose measures one sandbox's life: create (copy a
// small workspace, create and start the container), exec `true`, close
// (remove the container and the copy). Reports p50 and p99 in ms besides
// the mean; the reference on this kind of machine: Docker 485-623 ms.
//
//	go test -run '^$' -bench CreateExecClose -benchtime 30x ./sandbox/docker
func BenchmarkCreateExecClose(b *testing.B) {
	be := testBackend(b)
	src := b.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.py"), []byte("print('hi')\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		sb, err := be.Create(ctx, sandbox.Spec{Workspace: src})
		if err != nil {
			b.Fatal(err)
		}
		res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec true: %+v %v", res, err)
		}
		if err := sb.Close(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkExec measures one `true` in a running sandbox (the per-command
// cost an agent's tool call pays).
func BenchmarkExec(b *testing.B) {
	sb, err := testBackend(b).Create(context.Background(), sandbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec true: %+v %v", res, err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkAnchorHostExec is the anchor the figures above are read
// against: fork and exec of `true` on the host, no sandbox.
func BenchmarkAnchorHostExec(b *testing.B) {
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkAnchorEngineRun is the engine's floor, the anchor for
// BenchmarkCreateExecClose: `docker run --rm IMAGE true` through the same
// API (create, start, wait for exit, remove), with no workspace, limits or
// exec. The ratio of the two is what this backend adds.
func BenchmarkAnchorEngineRun(b *testing.B) {
	be := testBackend(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		c, err := be.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config:     &container.Config{Image: be.opts.Image, Cmd: []string{"true"}, Labels: map[string]string{LabelKey: Owner()}},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		if err != nil {
			b.Fatal(err)
		}
		wait := be.cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
		if _, err := be.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-wait.Result:
		case err := <-wait.Error:
			b.Fatal(err)
		}
		if _, err := be.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		i := int(q * float64(len(lat)-1))
		return float64(lat[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
