//go:build linux

package local_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/internal/cgroupfs"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/sandbox/sandboxtest"
)

// The benchmarks time one sandbox's whole life, create + exec `true` +
// close, and report p50 and p99 besides the mean. Anchors in the same run:
// a plain fork+exec of `true`, and bubblewrap with every namespace
// (`bwrap --unshare-all --ro-bind / / true`), the usual namespace sandbox.

// cpuTime is the CPU time (user + system) of this process and every
// process it started: on a busy machine it varies much less than wall
// time. It is read from a cpuacct cgroup that benchCPU puts the process in,
// which counts processes however they are reaped (the spawner lets the
// kernel reap the inits, whose CPU time then reaches no parent's
// RUSAGE_CHILDREN); without one (cgroup v2, no cpuacct), from getrusage of
// this process and its reaped children.
var cpuTime = rusageTime

func rusageTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	var t time.Duration
	for _, r := range []syscall.Rusage{self, kids} {
		t += time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return t
}

// TestMain runs the benchmarks in a cpuacct cgroup of their own (see
// cpuTime) when the v1 cpuacct hierarchy is there.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		if flag.Parse(); flag.Lookup("test.bench").Value.String() == "" {
			return m.Run()
		}
		own, err := cgroupfs.Of(0)
		path, ok := own["cpuacct"]
		if err != nil || !ok {
			return m.Run()
		}
		parent := filepath.Join(cgroupfs.Root, "cpuacct", path)
		dir := filepath.Join(parent, "legorl-bench-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return m.Run()
		}
		defer os.Remove(dir)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return m.Run()
		}
		defer os.WriteFile(filepath.Join(parent, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
		cpuTime = func() time.Duration {
			b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
			if err != nil {
				panic(err)
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				panic(err)
			}
			return time.Duration(ns)
		}
		return m.Run()
	}())
}

func reportPercentiles(b *testing.B, ds []time.Duration, cpu0 time.Duration) {
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(ds)), "cpu-ms/op")
	slices.Sort(ds)
	p := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}

// benchSandbox times sandbox lives gap apart. The gap (the time between
// rollouts, for prestarted inits to be made) is not timed, but the CPU
// spent in it is counted: cpu-ms/op is the whole process tree's.
func benchSandbox(b *testing.B, opts local.Options, spec sandbox.Spec, gap time.Duration) {
	if opts.InitPath == "" {
		opts.InitPath = localtest.Init(b)
	}
	be := local.New(opts)
	ctx := context.Background()
	ds := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		if gap > 0 {
			b.StopTimer()
			time.Sleep(gap)
			b.StartTimer()
		}
		start := time.Now()
		sb, err := be.Create(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
		if err := sb.Close(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	be.Close() // reaps the helper, whose children's CPU time then counts
	reportPercentiles(b, ds, cpu0)
}

// arrivalGap is the time between sandboxes in the benchmarks of the
// default options, which prestart inits: rollouts arrive apart, not back
// to back.
const arrivalGap = 20 * time.Millisecond

// BenchmarkLocal is the full sandbox with the default options (cgroups,
// seccomp, prestarted inits), a small workspace, sandboxes arrivalGap apart.
func BenchmarkLocal(b *testing.B) {
	benchSandbox(b, local.Options{}, sandbox.Spec{Workspace: sandboxtest.Workspace(b)}, arrivalGap)
}

// BenchmarkLocalBackToBack is BenchmarkLocal with no gap: sandboxes come
// faster than inits are prestarted, and Create often starts its own.
func BenchmarkLocalBackToBack(b *testing.B) {
	benchSandbox(b, local.Options{}, sandbox.Spec{Workspace: sandboxtest.Workspace(b)}, 0)
}

// BenchmarkLocalNoPrestart starts each sandbox's init in Create (the
// default before issue 18), back to back.
func BenchmarkLocalNoPrestart(b *testing.B) {
	benchSandbox(b, local.Options{NoPrestart: true}, sandbox.Spec{Workspace: sandboxtest.Workspace(b)}, 0)
}

// BenchmarkLocalNoCgroups shows what the cgroups cost.
func BenchmarkLocalNoCgroups(b *testing.B) {
	benchSandbox(b, local.Options{NoCgroups: true}, sandbox.Spec{Workspace: sandboxtest.Workspace(b)}, arrivalGap)
}

// BenchmarkExecOnly times Exec of `true` in a sandbox that already exists.
func BenchmarkExecOnly(b *testing.B) {
	be := local.New(local.Options{NoPrestart: true}) // one sandbox: nothing to prestart
	sb, err := be.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime()
	for b.Loop() {
		start := time.Now()
		if _, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	sb.Close()
	be.Close()
	reportPercentiles(b, ds, cpu0)
}

func benchCommand(b *testing.B, name string, args ...string) {
	path, err := exec.LookPath(name)
	if err != nil {
		b.Fatalf("%s is missing (make test installs it): %v", name, err)
	}
	ds := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime()
	for b.Loop() {
		start := time.Now()
		if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v %s", name, err, out)
		}
		ds = append(ds, time.Since(start))
	}
	reportPercentiles(b, ds, cpu0)
}

// BenchmarkAnchorForkExec is a plain fork+exec of `true` from Go.
func BenchmarkAnchorForkExec(b *testing.B) { benchCommand(b, "true") }

// BenchmarkAnchorBubblewrap is bubblewrap with all namespaces.
func BenchmarkAnchorBubblewrap(b *testing.B) {
	benchCommand(b, "bwrap", "--unshare-all", "--ro-bind", "/", "/", "true")
}

// BenchmarkLocalBigHost is BenchmarkLocalNoPrestart from a host process
// holding 2 GiB: starting a process in a new user namespace copies the
// parent's page tables (no vfork), which the spawner keeps small.
func BenchmarkLocalBigHost(b *testing.B) {
	ballast := make([]byte, 2<<30)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
	benchSandbox(b, local.Options{NoPrestart: true}, sandbox.Spec{Workspace: sandboxtest.Workspace(b)}, 0)
	runtime.KeepAlive(ballast)
}

// BenchmarkLocalInit is BenchmarkLocalNoPrestart with the init binary that
// LEGORL_BENCH_INIT names (Options.InitPath; skipped when unset), such as
// a static legorl-sandbox-init or bin/legorl: what each init costs.
func BenchmarkLocalInit(b *testing.B) {
	path := os.Getenv("LEGORL_BENCH_INIT")
	if path == "" {
		b.Skip("LEGORL_BENCH_INIT names no init binary")
	}
	benchSandbox(b, local.Options{NoPrestart: true, InitPath: path}, sandbox.Spec{Workspace: sandboxtest.Workspace(b)}, 0)
}
