package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/legorl/legorl/sandbox"
)

// The tests need a running Docker Engine with the base image; `make test`
// starts one (scripts/docker/start-dockerd.sh) and builds the image
// (scripts/docker/base-image.sh). They fail, never skip, without it.
//
//	LEGORL_DOCKER_HOST   the engine, e.g. unix:///repo/.cache/docker/docker.sock
//	LEGORL_DOCKER_IMAGE  the image (default DefaultImage)
var (
	sharedOnce sync.Once
	shared     *Backend
	sharedErr  error
)

// testBackend returns the backend on the test engine, or fails the test.
func testBackend(tb testing.TB) *Backend {
	tb.Helper()
	sharedOnce.Do(func() {
		host := os.Getenv("LEGORL_DOCKER_HOST")
		if host == "" {
			sharedErr = errors.New("LEGORL_DOCKER_HOST is not set: start an engine with scripts/docker/start-dockerd.sh " +
				"and build the image with scripts/docker/base-image.sh (make test does both)")
			return
		}
		shared, sharedErr = New(context.Background(), Options{Host: host, Image: os.Getenv("LEGORL_DOCKER_IMAGE")})
		if sharedErr != nil {
			return
		}
		if _, err := shared.cli.ImageInspect(context.Background(), shared.opts.Image); err != nil {
			sharedErr = fmt.Errorf("image %s missing (build it with scripts/docker/base-image.sh): %v", shared.opts.Image, err)
		}
	})
	if sharedErr != nil {
		tb.Fatalf("docker test engine: %v", sharedErr)
	}
	return shared
}

// newBox creates a sandbox that is closed when the test ends.
func newBox(tb testing.TB, spec sandbox.Spec) sandbox.Sandbox {
	tb.Helper()
	b := testBackend(tb)
	sb, err := b.Create(context.Background(), spec)
	if err != nil {
		tb.Fatalf("create: %v", err)
	}
	tb.Cleanup(func() {
		if err := sb.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return sb
}

func run(tb testing.TB, sb sandbox.Sandbox, cmd sandbox.Cmd) sandbox.Result {
	tb.Helper()
	res, err := sb.Exec(context.Background(), cmd)
	if err != nil {
		tb.Fatalf("exec %q: %v", cmd.Args, err)
	}
	return res
}

func sh(script string) sandbox.Cmd { return sandbox.Cmd{Args: []string{"sh", "-c", script}} }

func TestExitCodes(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{})
	tests := []struct {
		name   string
		script string
		code   int
		signal string
	}{
		{"true", "true", 0, ""},
		{"false", "false", 1, ""},
		{"exit 7", "exit 7", 7, ""},
		{"killed by a signal", "kill -TERM $$", -1, "terminated"},
		{"missing program", "exec /no/such/program", 127, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, sb, sh(tc.script))
			if res.Outcome != sandbox.OutcomeCompleted || res.ExitCode != tc.code || res.Signal != tc.signal {
				t.Fatalf("got outcome %s code %d signal %q (%s), want completed %d %q",
					res.Outcome, res.ExitCode, res.Signal, res.Stderr, tc.code, tc.signal)
			}
			if res.Duration <= 0 {
				t.Errorf("duration %v, want > 0", res.Duration)
			}
		})
	}
	// Programs run directly, without a shell of the caller's.
	direct := []struct {
		args []string
		code int
	}{
		{[]string{"no-such-program"}, 127},
		{[]string{"/etc/passwd"}, 126},
		{[]string{"python3", "-c", "import sys; sys.exit(5)"}, 5},
	}
	for _, tc := range direct {
		t.Run(tc.args[0], func(t *testing.T) {
			res := run(t, sb, sandbox.Cmd{Args: tc.args})
			if res.Outcome != sandbox.OutcomeCompleted || res.ExitCode != tc.code {
				t.Fatalf("got outcome %s code %d (%s), want completed %d", res.Outcome, res.ExitCode, res.Stderr, tc.code)
			}
		})
	}
}

func TestStdoutStderrAndStdin(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{})
	res := run(t, sb, sandbox.Cmd{Args: []string{"sh", "-c", "cat; echo err >&2"}, Stdin: strings.NewReader("from stdin\n")})
	if string(res.Stdout) != "from stdin\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// No Stdin: reads see end of file at once instead of blocking.
	res = run(t, sb, sandbox.Cmd{Args: []string{"cat"}, Timeout: 20 * time.Second})
	if res.Outcome != sandbox.OutcomeCompleted || res.ExitCode != 0 || len(res.Stdout) != 0 {
		t.Fatalf("cat without stdin: %+v", res)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("LEGORL_HOST_SECRET", "leak")
	sb := newBox(t, sandbox.Spec{Env: []string{"SPEC_VAR=spec"}})
	res := run(t, sb, sandbox.Cmd{Args: []string{"env"}, Env: []string{"CMD_VAR=cmd"}})
	env := string(res.Stdout)
	for _, want := range []string{"SPEC_VAR=spec", "CMD_VAR=cmd", "HOME=/tmp", "LANG=C.UTF-8", "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("environment lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "LEGORL_HOST_SECRET") {
		t.Errorf("host environment leaked in:\n%s", env)
	}
}

func TestWorkspaceIsolation(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	sb1 := newBox(t, sandbox.Spec{Workspace: src})
	sb2 := newBox(t, sandbox.Spec{Workspace: src, WorkspaceDir: "/repo"})

	res := run(t, sb1, sh("pwd; cat link; echo changed > a.txt; echo new > b.txt"))
	if res.ExitCode != 0 || string(res.Stdout) != "/workspace\noriginal\n" {
		t.Fatalf("sandbox 1: %+v (stderr %s)", res, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "a.txt")); string(b) != "original\n" {
		t.Errorf("the original workspace changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(sb1.HostWorkspace(), "a.txt")); string(b) != "changed\n" {
		t.Errorf("HostWorkspace does not show the change: %q", b)
	}
	if _, err := os.Stat(filepath.Join(sb1.HostWorkspace(), "b.txt")); err != nil {
		t.Errorf("HostWorkspace lacks the new file: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(sb1.HostWorkspace(), "link")); err != nil || l != "a.txt" {
		t.Errorf("symbolic link not kept as a link: %q %v", l, err)
	}

	res = run(t, sb2, sh("pwd; cat a.txt; ls"))
	if res.ExitCode != 0 || string(res.Stdout) != "/repo\noriginal\na.txt\nlink\n" {
		t.Fatalf("sandbox 2 sees another sandbox's changes: %q (stderr %s)", res.Stdout, res.Stderr)
	}
}

func TestOutputCaps(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{Limits: sandbox.Limits{OutputBytes: 1000}})
	var tee bytes.Buffer
	res := run(t, sb, sandbox.Cmd{
		Args:   []string{"sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x; echo small >&2"},
		Stdout: &tee,
	})
	if len(res.Stdout) != 1000 || !res.StdoutTruncated {
		t.Errorf("stdout: %d bytes, truncated %v; want 1000, true", len(res.Stdout), res.StdoutTruncated)
	}
	if string(res.Stderr) != "small\n" || res.StderrTruncated {
		t.Errorf("stderr: %q truncated %v", res.Stderr, res.StderrTruncated)
	}
	if tee.Len() != 5000 {
		t.Errorf("streamed %d bytes, want all 5000", tee.Len())
	}

	// A flood is drained, not buffered, and does not block the program.
	res = run(t, sb, sh("head -c 200000000 /dev/zero; echo done >&2"))
	if res.ExitCode != 0 || len(res.Stdout) != 1000 || !res.StdoutTruncated || string(res.Stderr) != "done\n" {
		t.Errorf("flood: code %d, %d bytes, truncated %v, stderr %q", res.ExitCode, len(res.Stdout), res.StdoutTruncated, res.Stderr)
	}
}

// ps lists the command lines in the sandbox, one per line.
func ps(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	res := run(t, sb, sandbox.Cmd{Args: []string{"ps", "-eo", "args="}})
	return string(res.Stdout)
}

func TestTimeoutKillsTree(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{})
	start := time.Now()
	// A child, a grandchild in its own session (a "daemon"), and the
	// waiting parent.
	res := run(t, sb, sandbox.Cmd{
		Args:    []string{"sh", "-c", "sleep 1001 & setsid sh -c 'sleep 1002' & sleep 1000"},
		Timeout: time.Second,
	})
	if res.Outcome != sandbox.OutcomeTimeout || res.ExitCode != -1 || res.Signal != "killed" || res.Detail == "" {
		t.Fatalf("got %+v, want a timeout", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v after a 1 s deadline", d)
	}
	if left := ps(t, sb); strings.Contains(left, "sleep 10") {
		t.Errorf("processes survived the timeout:\n%s", left)
	}
	// The sandbox still works.
	if res := run(t, sb, sh("echo ok")); string(res.Stdout) != "ok\n" {
		t.Errorf("after a timeout: %+v", res)
	}
}

func TestContextCancelKillsTree(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := sb.Exec(ctx, sh("sleep 1000"))
	if !errors.Is(err, context.DeadlineExceeded) || res.Outcome != sandbox.OutcomeTimeout {
		t.Fatalf("got %+v, %v; want a timeout and the context's error", res, err)
	}
	if left := ps(t, sb); strings.Contains(left, "sleep 1000") {
		t.Errorf("process survived:\n%s", left)
	}
}

func TestBackgroundProcessesDieWithTheirCommand(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{})
	tests := []struct{ name, script string }{
		{"output redirected", "sleep 1003 >/dev/null 2>&1 & echo started"},
		// The daemon keeps stdout open; the engine alone would wait 2 s for
		// it, past the deadline below.
		{"output inherited", "sleep 1004 & echo started"},
		{"own session", "setsid sleep 1005 & echo started"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, sb, sandbox.Cmd{Args: []string{"sh", "-c", tc.script}, Timeout: 1800 * time.Millisecond})
			if res.Outcome != sandbox.OutcomeCompleted || res.ExitCode != 0 || string(res.Stdout) != "started\n" {
				t.Fatalf("got %+v, want completed with the output", res)
			}
			if left := ps(t, sb); strings.Contains(left, "sleep 100") {
				t.Errorf("a background process outlived its command:\n%s", left)
			}
		})
	}
}

func TestConcurrentExecsAreSeparate(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{})
	long := make(chan sandbox.Result, 1)
	go func() {
		res, _ := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"sh", "-c", "sleep 3; echo survived"}, Timeout: time.Minute})
		long <- res
	}()
	time.Sleep(500 * time.Millisecond)
	// A timeout in one Exec kills its own tree only.
	res := run(t, sb, sandbox.Cmd{Args: []string{"sleep", "1006"}, Timeout: 300 * time.Millisecond})
	if res.Outcome != sandbox.OutcomeTimeout {
		t.Fatalf("short exec: %+v", res)
	}
	if res := <-long; res.Outcome != sandbox.OutcomeCompleted || string(res.Stdout) != "survived\n" {
		t.Fatalf("the other exec was hurt: %+v", res)
	}
}

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 64 << 20}})
	res := run(t, sb, sandbox.Cmd{
		Args:    []string{"python3", "-c", "b = bytearray(512 << 20); print(len(b))"},
		Timeout: time.Minute,
	})
	if res.Outcome != sandbox.OutcomeResourceLimit || res.Signal != "killed" || !strings.Contains(res.Detail, "memory") {
		t.Fatalf("got %+v (stderr %s), want resource_limit after an OOM kill", res, res.Stderr)
	}
	// The next command runs normally.
	if res := run(t, sb, sh("echo ok")); res.Outcome != sandbox.OutcomeCompleted || string(res.Stdout) != "ok\n" {
		t.Errorf("after the OOM kill: %+v", res)
	}
}

func TestPidsLimit(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{Limits: sandbox.Limits{Pids: 32}})
	bomb := `
import os, sys, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            os.close(1); os.close(2); time.sleep(60); os._exit(0)
        n += 1
except OSError:
    print(n); sys.exit(3)
print(n)
`
	res := run(t, sb, sandbox.Cmd{Args: []string{"python3", "-c", bomb}, Timeout: time.Minute})
	if res.Outcome != sandbox.OutcomeResourceLimit || res.ExitCode != 3 || !strings.Contains(res.Detail, "pids") {
		t.Fatalf("got %+v (stdout %s stderr %s), want resource_limit", res, res.Stdout, res.Stderr)
	}
}

func TestTmpIsCapped(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{Limits: sandbox.Limits{TmpBytes: 1 << 20}})
	res := run(t, sb, sh("head -c 4000000 /dev/zero > /tmp/fill"))
	if res.ExitCode == 0 {
		t.Fatalf("wrote 4 MB into a 1 MiB /tmp: %+v", res)
	}
	if res := run(t, sb, sh("rm /tmp/fill; echo x > /tmp/small && cat /tmp/small")); string(res.Stdout) != "x\n" {
		t.Errorf("/tmp not writable: %+v (%s)", res, res.Stderr)
	}
}

func TestConfinement(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{})
	tests := []struct {
		name, script, want string
	}{
		{"non-root user", "id -u; id -g", "1000\n1000\n"},
		{"no capabilities", "grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status | awk '{print $2}'", "0000000000000000\n0000000000000000\n0000000000000000\n"},
		{"no new privileges", "grep ^NoNewPrivs: /proc/self/status | awk '{print $2}'", "1\n"},
		{"read-only root", "touch /etc/x 2>/dev/null || echo refused; touch /usr/x 2>/dev/null || echo refused", "refused\nrefused\n"},
		{"only loopback", "ls /sys/class/net", "lo\n"},
		{"own pid namespace", "cat /proc/1/cmdline | tr '\\0' ' '", "/sbin/docker-init -- sleep infinity "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, sb, sh(tc.script))
			if string(res.Stdout) != tc.want {
				t.Errorf("got %q (stderr %q), want %q", res.Stdout, res.Stderr, tc.want)
			}
		})
	}
}

func TestNoNetwork(t *testing.T) {
	t.Parallel()
	// A server on the host's loopback, which a program in the sandbox
	// must not reach.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host secret\n"))
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	sb := newBox(t, sandbox.Spec{})
	probe := `
import socket, sys
for host, port in [("127.0.0.1", %d), ("10.0.0.1", 80), ("1.1.1.1", 53), ("169.254.169.254", 80)]:
    try:
        s = socket.create_connection((host, port), timeout=3)
        print("reached", host, port, s.recv(100))
    except OSError as e:
        print("blocked", host)
try:
    socket.getaddrinfo("deb.debian.org", 80)
    print("resolved")
except OSError:
    print("no dns")
`
	res := run(t, sb, sandbox.Cmd{Args: []string{"python3", "-c", fmt.Sprintf(probe, port)}, Timeout: time.Minute})
	want := "blocked 127.0.0.1\nblocked 10.0.0.1\nblocked 1.1.1.1\nblocked 169.254.169.254\nno dns\n"
	if string(res.Stdout) != want {
		t.Fatalf("network probe:\n%s\nstderr: %s\nwant:\n%s", res.Stdout, res.Stderr, want)
	}
}

func TestListen(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{})
	l, err := sb.Listen(context.Background(), 0)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the host process")
	})}
	go srv.Serve(l)
	defer srv.Close()
	port := l.Addr().(*net.TCPAddr).Port

	res := run(t, sb, sandbox.Cmd{Args: []string{"python3", "-c",
		fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:%d/', timeout=10).read().decode())", port)},
		Timeout: time.Minute})
	if res.ExitCode != 0 || string(res.Stdout) != "hello from the host process\n" {
		t.Fatalf("inside could not reach the listener: %+v (stderr %s)", res, res.Stderr)
	}

	// The listener lives in the sandbox's namespace, not on the host's loopback.
	c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err == nil {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
		b, _ := io.ReadAll(c)
		c.Close()
		if bytes.Contains(b, []byte("hello from the host process")) {
			t.Errorf("the sandbox's listener is reachable from the host's loopback")
		}
	}

	// A fixed port works too.
	l2, err := sb.Listen(context.Background(), 18080)
	if err != nil {
		t.Fatalf("listen on a fixed port: %v", err)
	}
	l2.Close()
}

func TestCloseLeavesNothing(t *testing.T) {
	t.Parallel()
	b := testBackend(t)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	sb, err := b.Create(context.Background(), sandbox.Spec{Workspace: src})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.(*box).id
	dir := sb.(*box).dir
	cg := sb.(*box).cg
	run(t, sb, sh("sleep 1000 >/dev/null 2>&1 & echo x > /tmp/t; echo y > new"))
	if err := sb.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := b.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("container %s still exists after Close", id[:12])
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp folder %s still exists (%v)", dir, err)
	}
	for _, d := range []string{cg.memory, cg.pids, cg.freezer} {
		if _, err := os.Stat(d); d != "" && !os.IsNotExist(err) {
			t.Errorf("cgroup %s still exists (%v)", d, err)
		}
	}
	if _, err := sb.Exec(context.Background(), sh("true")); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("exec after close: %v, want ErrClosed", err)
	}
	if _, err := sb.Listen(context.Background(), 0); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("listen after close: %v, want ErrClosed", err)
	}
}

func TestCreateErrors(t *testing.T) {
	b := testBackend(t)
	tests := []struct {
		name string
		spec sandbox.Spec
		also error
	}{
		{"missing image", sandbox.Spec{Image: "legorl/no-such-image:0"}, ErrImageMissing},
		{"missing workspace", sandbox.Spec{Workspace: "/no/such/folder"}, nil},
		{"relative workspace dir", sandbox.Spec{WorkspaceDir: "repo"}, nil},
		{"bad mount", sandbox.Spec{Mounts: []sandbox.Mount{{Source: "rel", Target: "/x"}}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := b.Create(context.Background(), tc.spec)
			if err == nil {
				sb.Close()
				t.Fatal("created; want an error")
			}
			if !errors.Is(err, sandbox.ErrSetup) || (tc.also != nil && !errors.Is(err, tc.also)) {
				t.Errorf("error %v does not wrap ErrSetup / %v", err, tc.also)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
	assertNoContainers(t, b)
}

func TestMounts(t *testing.T) {
	t.Parallel()
	ro := t.TempDir()
	os.WriteFile(filepath.Join(ro, "data"), []byte("shared\n"), 0o644)
	sb := newBox(t, sandbox.Spec{Mounts: []sandbox.Mount{{Source: ro, Target: "/data", ReadOnly: true}}})
	res := run(t, sb, sh("cat /data/data; touch /data/x 2>/dev/null || echo refused"))
	if string(res.Stdout) != "shared\nrefused\n" {
		t.Fatalf("got %q (stderr %s)", res.Stdout, res.Stderr)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(context.Background(), Options{Host: "unix:///no/such/docker.sock"}); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("no daemon: %v, want ErrNoDaemon", err)
	}
	for _, u := range []string{"0:0", "root", "1000", "1000:0"} {
		if _, err := New(context.Background(), Options{Host: "unix:///no/such/docker.sock", User: u}); err == nil || errors.Is(err, ErrNoDaemon) {
			t.Errorf("user %q: %v, want a refusal before connecting", u, err)
		}
	}
}

// TestDefaultImageMatchesScript keeps DefaultImage and the tag that
// scripts/docker/base-image.sh builds in step.
func TestDefaultImageMatchesScript(t *testing.T) {
	b, err := os.ReadFile("../../scripts/docker/base-image.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION=(\S+)$`).FindSubmatch(b)
	if m == nil || "legorl/base:"+string(m[1]) != DefaultImage {
		t.Fatalf("base-image.sh builds %q, DefaultImage is %q", m, DefaultImage)
	}
}

// assertNoContainers fails when any sandbox container is left on the engine.
func assertNoContainers(t *testing.T, b *Backend) {
	t.Helper()
	list, err := b.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelKey+"="+Owner())})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		t.Errorf("container %s (%v) left behind", c.ID[:12], c.Names)
	}
}

// TestMain runs the tests, then fails the run if any sandbox container is
// left on the engine: every Close must remove its container.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		list, err := shared.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", LabelKey+"="+Owner())})
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "docker: listing containers after the tests: %v\n", err)
			code = 1
		case len(list.Items) > 0:
			for _, c := range list.Items {
				fmt.Fprintf(os.Stderr, "docker: container %s %v left behind by the tests\n", c.ID[:12], c.Names)
			}
			code = 1
		}
		shared.Close()
	}
	os.Exit(code)
}

func TestLimitsApplied(t *testing.T) {
	t.Parallel()
	sb := newBox(t, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 300 << 20, Pids: 77, CPUs: 0.5}})
	// The container sees its own cgroups (v1: one folder per controller;
	// v2: one folder); print whichever exist.
	res := run(t, sb, sh(`cd /sys/fs/cgroup
for f in memory/memory.limit_in_bytes memory.max pids/pids.max pids.max cpu/cpu.cfs_quota_us cpu.max; do
	[ -f "$f" ] && echo "$f $(cat $f)"
done; true`))
	got := string(res.Stdout)
	v1 := "memory/memory.limit_in_bytes 314572800\npids/pids.max 77\ncpu/cpu.cfs_quota_us 50000\n"
	v2 := "memory.max 314572800\npids.max 77\ncpu.max 50000 100000\n"
	if got != v1 && got != v2 {
		t.Fatalf("cgroup limits inside:\n%s\nwant (v1)\n%s\nor (v2)\n%s", got, v1, v2)
	}
}
