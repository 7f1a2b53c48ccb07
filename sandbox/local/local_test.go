//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/internal/capfs"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/sandbox/sandboxtest"
)

// backend returns a local backend whose helper process ends with the test,
// running the init the tests run (localtest.Init: the init make build ships) unless opts names one.
func backend(t testing.TB, opts local.Options) *local.Backend {
	if opts.InitPath == "" {
		opts.InitPath = localtest.Init(t)
	}
	b := local.New(opts)
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	sandboxtest.Conformance(t, backend(t, local.Options{}))
}

// TestConformancePrestart: sandboxes made from prestarted inits behave the same.
func TestConformancePrestart(t *testing.T) {
	sandboxtest.Conformance(t, backend(t, local.Options{Prestart: 2}))
}

func newSandbox(t *testing.T, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	if spec.Workspace == "" {
		spec.Workspace = sandboxtest.Workspace(t)
	}
	sb, err := backend(t, local.Options{}).Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

func run(t *testing.T, sb sandbox.Sandbox, script string) sandbox.Result {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"sh", "-c", script}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// processesOf lists host pids whose real uid is uid (every pid for -1).
func processesOf(uid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if uid == -1 {
			pids = append(pids, pid)
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestTeardownLeavesNothing: after Close no process, mount, cgroup or file
// of the sandbox is left on the host, even with daemons and a listener.
func TestTeardownLeavesNothing(t *testing.T) {
	sb, err := backend(t, local.Options{}).Create(context.Background(), sandbox.Spec{Workspace: sandboxtest.Workspace(t)})
	if err != nil {
		t.Fatal(err)
	}
	uid, holder, dir, cgs := local.HostUID(sb), local.HolderPid(sb), local.SandboxDir(sb), local.CgroupDirs(sb)
	if len(cgs) == 0 {
		t.Fatal("no cgroups were made")
	}
	for _, d := range cgs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("cgroup %s: %v", d, err)
		}
	}
	if _, err := sb.Listen(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	// A command that is still running, with a setsid'd daemon, when Close comes.
	done := make(chan sandbox.Result, 1)
	go func() {
		res, _ := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"sh", "-c", "setsid sleep 1000 & sleep 1000"}, Timeout: time.Hour})
		done <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(processesOf(uid)) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(processesOf(uid)); n < 3 {
		t.Fatalf("%d processes of uid %d before close, want holder + 2 sleeps + sh", n, uid)
	}
	if err := sb.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case res := <-done:
		if res.Outcome == sandbox.OutcomeCompleted {
			t.Errorf("the exec interrupted by Close reports %s", res.Outcome)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Exec did not return after Close")
	}
	if pids := processesOf(uid); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
	if err := syscall.Kill(holder, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("holder %d: %v, want ESRCH", holder, err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), filepath.Base(dir)) {
		t.Errorf("mounts left:\n%s", mi)
	}
	for _, d := range cgs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left: %v", d, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("folder %s left: %v", dir, err)
	}
}

// TestPrivileges: the sandbox's root is an unprivileged host uid with no
// capabilities, no way to gain any, and a read-only system.
func TestPrivileges(t *testing.T) {
	sb := newSandbox(t, sandbox.Spec{})
	uid := local.HostUID(sb)
	res := run(t, sb, `cat /proc/self/uid_map; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status`)
	out := string(res.Stdout)
	if f := strings.Fields(out); len(f) < 3 || f[0] != "0" || f[1] != strconv.Itoa(uid) || f[2] != "1" {
		t.Errorf("uid_map %q, want 0 %d 1", out, uid)
	}
	if uid < 1<<30 {
		t.Errorf("host uid %d is in the range of real accounts", uid)
	}
	for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	tests := []struct{ name, script string }{
		{"write /usr", `touch /usr/x`},
		{"write /etc", `echo x >> /etc/passwd`},
		{"write /", `touch /x`},
		{"write /dev", `touch /dev/x`},
		{"mount", `mount -t tmpfs x /tmp`},
		{"remount /usr rw", `mount -o remount,rw /usr`},
		{"unshare user", `unshare -U true`},
		{"chroot", `chroot / true`},
		{"read /etc/shadow", `test -s /etc/shadow`},
		{"ptrace the init", `python3 -c 'import ctypes,sys; l=ctypes.CDLL(None); sys.exit(0 if l.ptrace(16, 1, 0, 0) == 0 else 1)'`},
		{"device node", `python3 -c 'import os; os.mknod("/tmp/n", 0o20666, os.makedev(1, 3))'`},
		{"setuid binary", `cp /bin/sh /tmp/s && chmod 4755 /tmp/s && test -u /tmp/s && /tmp/s -c 'test $(id -u) = 0 && grep -q "CapEff:.0000000000000000" /proc/self/status && exit 1; exit 0'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if res := run(t, sb, tt.script); res.ExitCode == 0 {
				t.Errorf("%q succeeded inside the sandbox (stdout %q)", tt.script, res.Stdout)
			}
		})
	}
}

// TestCreateErrors: bad specs fail with ErrSetup and a message naming the problem.
func TestCreateErrors(t *testing.T) {
	b := backend(t, local.Options{})
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	tests := []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"missing workspace", sandbox.Spec{Workspace: "/nonexistent/ws"}, "/nonexistent/ws"},
		{"workspace is a file", sandbox.Spec{Workspace: file}, "not a folder"},
		{"relative workspace dir", sandbox.Spec{WorkspaceDir: "ws"}, `"ws"`},
		{"root workspace dir", sandbox.Spec{WorkspaceDir: "/"}, `"/"`},
		{"relative mount", sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/usr", Target: "usr"}}}, `"usr"`},
		{"missing mount source", sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/nonexistent/m", Target: "/m"}}}, "/nonexistent/m"},
		{"too many mounts", sandbox.Spec{Mounts: make([]sandbox.Mount, 16)}, "at most 15"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, err := b.Create(context.Background(), tt.spec)
			if err == nil {
				sb.Close()
				t.Fatal("no error")
			}
			if !errors.Is(err, sandbox.ErrSetup) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q: want ErrSetup naming %s", err, tt.want)
			}
		})
	}
}

// TestMounts: extra mounts appear read-only or writable as asked.
func TestMounts(t *testing.T) {
	ro, rw := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ro, "r.txt"), []byte("ro\n"), 0o644)
	os.Chmod(rw, 0o777)
	sb := newSandbox(t, sandbox.Spec{Mounts: []sandbox.Mount{
		{Source: ro, Target: "/opt/ro", ReadOnly: true},
		{Source: rw, Target: "/opt/rw"},
	}})
	res := run(t, sb, `cat /opt/ro/r.txt; touch /opt/ro/x 2>/dev/null && echo ro-writable; echo w > /opt/rw/w.txt && echo wrote`)
	if got := string(res.Stdout); got != "ro\nwrote\n" {
		t.Fatalf("stdout %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "w.txt")); err != nil || string(b) != "w\n" {
		t.Fatalf("host side of the writable mount: %q %v", b, err)
	}
}

func ExampleBackend() {
	b := local.New(local.Options{})
	defer b.Close()
	sb, err := b.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()
	res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"sh", "-c", "echo hello from $(pwd)"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %d %s", res.Outcome, res.ExitCode, res.Stdout)
	// Output: completed 0 hello from /workspace
}

// TestToolchains: what tasks run inside works under the filter and limits:
// Python with threads and subprocesses, a Go binary (runtime threads,
// os/exec), git.
func TestToolchains(t *testing.T) {
	ws := sandboxtest.Workspace(t)
	src := filepath.Join(t.TempDir(), "m.go")
	prog := "package main\nimport (\"fmt\"; \"os/exec\")\nfunc main() { out, err := exec.Command(\"echo\", \"child\").Output(); fmt.Print(\"go \", string(out), err, \"\\n\") }\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(ws, "gobin"), src)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sb := newSandbox(t, sandbox.Spec{Workspace: ws})
	res := run(t, sb, `set -e
python3 -c 'import threading, subprocess; t = threading.Thread(target=print, args=("py",)); t.start(); t.join(); subprocess.run(["true"], check=True)'
./gobin
git init -q r && cd r && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x && git log --oneline | wc -l`)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got, want := string(res.Stdout), "py\ngo child\n<nil>\n1\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
}

// TestExecTooBig: a command line over the protocol's limit is an error,
// and the sandbox goes on working.
func TestExecTooBig(t *testing.T) {
	sb := newSandbox(t, sandbox.Spec{})
	_, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"true"}, Env: []string{"BIG=" + strings.Repeat("x", 2<<20)}})
	if err == nil || !strings.Contains(err.Error(), "too big") {
		t.Fatalf("error %v, want one saying the command is too big", err)
	}
	if res := run(t, sb, "echo ok"); string(res.Stdout) != "ok\n" {
		t.Fatalf("after: %+v", res)
	}
}

// TestBackendClose: Close ends prestarted inits and removes their folders
// (workspace mounts) and cgroups, and the backend's folder that held them;
// Create fails afterwards.
func TestBackendClose(t *testing.T) {
	dir := t.TempDir()
	b := local.New(local.Options{Prestart: 2, Dir: dir, InitPath: localtest.Init(t)})
	sb, err := b.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	cgs := local.CgroupDirs(sb)
	sb.Close()
	time.Sleep(500 * time.Millisecond) // let the pool fill
	if folders, _ := filepath.Glob(filepath.Join(dir, "legorl-sandbox-*", "legorl-sandbox-*")); len(folders) != 2 {
		t.Fatalf("prestarted folders %v in %s before Close, want 2", folders, dir)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("%d folders left in %s after Close", len(entries), dir)
	}
	if m := mountsUnder(t, dir); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	for _, cg := range cgs {
		if m, _ := filepath.Glob(filepath.Join(filepath.Dir(cg), "legorl-sandbox-"+strconv.Itoa(os.Getpid())+"-*")); len(m) > 0 {
			t.Errorf("cgroups left: %v", m)
		}
	}
	if _, err := b.Create(context.Background(), sandbox.Spec{}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("create after close: %v, want ErrClosed", err)
	}
	// Every holder ("legorl-sandbox-init") is gone.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			ppid := parentOf(e.Name())
			if strings.HasPrefix(string(cmdline), "legorl-sandbox-") && ppid != 0 && isOurs(ppid) {
				n++
			}
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d helper or init processes of this test left after Close", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// parentOf returns the parent pid of /proc/PID, 0 when unknown.
func parentOf(pid string) int {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// isOurs says whether pid is this process or one of its descendants.
func isOurs(pid int) bool {
	for i := 0; i < 10 && pid > 1; i++ {
		if pid == os.Getpid() {
			return true
		}
		pid = parentOf(strconv.Itoa(pid))
	}
	return false
}

// mountsUnder lists the mount points at or below dir (capfs.Under).
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	out, err := capfs.Under(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOrphansCollected: the folders, workspace mounts and cgroups of a
// sandbox and of the prestarted inits of a host process that was killed
// are removed by the next backend.
func TestOrphansCollected(t *testing.T) {
	if os.Getenv("LEGORL_TEST_ORPHAN") == "1" {
		// The child: make a sandbox, let the prestarted inits be made,
		// print the sandbox's folder and cgroups, and die unclosed.
		sb, err := local.New(local.Options{InitPath: localtest.Init(t)}).Create(context.Background(), sandbox.Spec{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		time.Sleep(2 * time.Second)
		fmt.Println("dir", local.SandboxDir(sb), strings.Join(local.CgroupDirs(sb), " "))
		os.Stdout.Sync()
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphansCollected$")
	cmd.Env = append(os.Environ(), "LEGORL_TEST_ORPHAN=1")
	out, _ := cmd.Output()
	var paths []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "dir" {
			paths = f[1:]
		}
	}
	if len(paths) < 2 {
		t.Fatalf("child output %q", out)
	}
	// Everything the child named: the sandbox's and the prestarted inits'.
	var globs []string
	prefix := "legorl-sandbox-" + strconv.Itoa(cmd.Process.Pid) + "-*"
	for _, p := range paths {
		globs = append(globs, filepath.Join(filepath.Dir(p), prefix))
	}
	left := func() []string {
		var out []string
		for _, g := range globs {
			m, _ := filepath.Glob(g)
			out = append(out, m...)
		}
		return out
	}
	if got, want := len(left()), (1+2)*len(paths); got < want {
		t.Fatalf("the killed child left %v, want at least %d folders and cgroups (its sandbox and 2 prestarted inits)", left(), want)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the killed child left no %s to collect: %v", p, err)
		}
	}
	if m := mountsUnder(t, paths[0]); len(m) != 1 {
		t.Fatalf("the killed child left mounts %v, want its workspace", m)
	}
	// Its sandbox processes die with it; its folders and cgroups stay until
	// a backend collects them.
	deadline := time.Now().Add(10 * time.Second)
	for {
		sb := newSandbox(t, sandbox.Spec{})
		sb.Close()
		l := left()
		if len(l) == 0 {
			for _, p := range paths {
				if m := mountsUnder(t, filepath.Dir(p)); len(m) > 0 && strings.Contains(strings.Join(m, " "), "legorl-sandbox-"+strconv.Itoa(cmd.Process.Pid)+"-") {
					t.Fatalf("mounts left: %v", m)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v left", l)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
