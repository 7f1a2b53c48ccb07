// Package sandboxtest is the conformance suite every sandbox backend passes:
// the behaviour callers (rollouts, grading) rely on, and the isolation the
// agent under training must not get around.
//
// A backend's test calls Conformance with a ready backend. The commands run
// inside need a Debian-like userland: sh, bash, coreutils, getent, python3.
package sandboxtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/internal/capfs"
)

// canaryEnv is set in the host process; nothing inside may see its value.
const canaryEnv = "LEGORL_SANDBOXTEST_CANARY"

// Conformance runs the whole suite against b. Subtests create their own
// sandboxes and close them.
func Conformance(t *testing.T, b sandbox.Backend) {
	canary := "canary-" + randomHex(8)
	t.Setenv(canaryEnv, canary)
	tests := []struct {
		name string
		run  func(t *testing.T, b sandbox.Backend)
	}{
		{"Workspace", testWorkspace},
		{"ExitCodes", testExitCodes},
		{"OutputAndEnv", func(t *testing.T, b sandbox.Backend) { testOutputAndEnv(t, b, canary) }},
		{"OutputTruncation", testOutputTruncation},
		{"Stdin", testStdin},
		{"TimeoutKillsTree", testTimeoutKillsTree},
		{"BackgroundChildDoesNotHold", testBackgroundChild},
		{"ContextCancel", testContextCancel},
		{"MemoryLimit", testMemoryLimit},
		{"ForkBomb", testForkBomb},
		{"TmpCap", testTmpCap},
		{"DiskCap", testDiskCap},
		{"DiskPastMemory", testDiskPastMemory},
		{"NoNetwork", testNoNetwork},
		{"Listen", testListen},
		{"HostSecrets", func(t *testing.T, b sandbox.Backend) { testHostSecrets(t, b, canary) }},
		{"HostProcessesHidden", testHostProcesses},
		{"Hostname", testHostname},
		{"NoTTY", testNoTTY},
		{"OpenFiles", testOpenFiles},
		{"Concurrent", testConcurrent},
		{"Close", testClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, b) })
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Workspace makes a small source workspace and returns its path.
func Workspace(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"hello.txt":   "hello\n",
		"sub/a.txt":   "a\n",
		"bin/run.sh":  "#!/bin/sh\necho ran \"$@\"\n",
		"keep/me.txt": "keep\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// create makes a sandbox over a fresh workspace and closes it at the end of
// the test.
func create(t *testing.T, b sandbox.Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	if spec.Workspace == "" {
		spec.Workspace = Workspace(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return sb
}

// sh runs a shell script inside and fails the test when the sandbox fails.
func sh(t *testing.T, sb sandbox.Sandbox, script string, mod ...func(*sandbox.Cmd)) sandbox.Result {
	t.Helper()
	c := sandbox.Cmd{Args: []string{"sh", "-c", script}, Timeout: time.Minute}
	for _, m := range mod {
		m(&c)
	}
	res, err := sb.Exec(context.Background(), c)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

func wantCompleted(t *testing.T, res sandbox.Result, code int) {
	t.Helper()
	if res.Outcome != sandbox.OutcomeCompleted || res.ExitCode != code {
		t.Fatalf("outcome %s exit %d (want completed, exit %d); detail %q; stdout %q; stderr %q",
			res.Outcome, res.ExitCode, code, res.Detail, res.Stdout, res.Stderr)
	}
}

func testWorkspace(t *testing.T, b sandbox.Backend) {
	src := Workspace(t)
	sb := create(t, b, sandbox.Spec{Workspace: src})
	res := sh(t, sb, `pwd; cat hello.txt; bin/run.sh x; echo new > new.txt; echo changed > hello.txt; rm sub/a.txt; mkdir d && echo in > d/f`)
	wantCompleted(t, res, 0)
	if got, want := string(res.Stdout), "/workspace\nhello\nran x\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	// The source is never modified.
	if b, err := os.ReadFile(filepath.Join(src, "hello.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("source hello.txt: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(src, "sub/a.txt")); err != nil {
		t.Errorf("source sub/a.txt was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(src, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("new.txt appeared in the source: %v", err)
	}
	// The changes are visible in HostWorkspace.
	ws := sb.HostWorkspace()
	for name, want := range map[string]string{"new.txt": "new\n", "hello.txt": "changed\n", "d/f": "in\n", "keep/me.txt": "keep\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("host workspace %s: %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "sub/a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host workspace still has sub/a.txt: %v", err)
	}
	// A second sandbox over the same source starts from the pristine copy.
	sb2 := create(t, b, sandbox.Spec{Workspace: src, WorkspaceDir: "/work/repo"})
	res = sh(t, sb2, `pwd; cat hello.txt; ls new.txt 2>/dev/null || echo absent`)
	wantCompleted(t, res, 0)
	if got, want := string(res.Stdout), "/work/repo\nhello\nabsent\n"; got != want {
		t.Errorf("second sandbox: stdout %q, want %q", got, want)
	}
	// Dir is honoured.
	res = sh(t, sb2, `pwd`, func(c *sandbox.Cmd) { c.Dir = "/work/repo/sub" })
	if got := string(res.Stdout); got != "/work/repo/sub\n" {
		t.Errorf("Dir: pwd %q", got)
	}
}

func testExitCodes(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{})
	tests := []struct {
		name   string
		args   []string
		code   int
		signal bool
	}{
		{"zero", []string{"true"}, 0, false},
		{"one", []string{"false"}, 1, false},
		{"seven", []string{"sh", "-c", "exit 7"}, 7, false},
		{"killed", []string{"sh", "-c", "kill -9 $$"}, -1, true},
		{"not found", []string{"no-such-program-here"}, 127, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: tt.args, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != sandbox.OutcomeCompleted || res.ExitCode != tt.code {
				t.Fatalf("outcome %s exit %d, want completed %d (%q)", res.Outcome, res.ExitCode, tt.code, res.Detail)
			}
			if tt.signal && res.Signal != "killed" {
				t.Fatalf("signal %q, want killed", res.Signal)
			}
			if !tt.signal && res.Signal != "" {
				t.Fatalf("signal %q, want none", res.Signal)
			}
			if res.Duration <= 0 {
				t.Fatalf("duration %v", res.Duration)
			}
		})
	}
	if _, err := sb.Exec(context.Background(), sandbox.Cmd{}); err == nil {
		t.Fatal("exec of no command: no error")
	}
}

func testOutputAndEnv(t *testing.T, b sandbox.Backend, canary string) {
	sb := create(t, b, sandbox.Spec{Env: []string{"SPEC_VAR=spec"}})
	var streamed bytes.Buffer
	res := sh(t, sb, `echo out; echo err >&2; echo "$SPEC_VAR $CMD_VAR $HOME"; env`, func(c *sandbox.Cmd) {
		c.Env = []string{"CMD_VAR=cmd"}
		c.Stdout = &streamed
	})
	wantCompleted(t, res, 0)
	if !strings.HasPrefix(string(res.Stdout), "out\nspec cmd /") {
		t.Errorf("stdout %q", res.Stdout)
	}
	if string(res.Stderr) != "err\n" {
		t.Errorf("stderr %q", res.Stderr)
	}
	if !bytes.Equal(streamed.Bytes(), res.Stdout) {
		t.Errorf("streamed stdout %q differs from captured %q", streamed.Bytes(), res.Stdout)
	}
	if strings.Contains(string(res.Stdout), canary) || strings.Contains(string(res.Stdout), canaryEnv) {
		t.Errorf("the host environment leaked in: %q", res.Stdout)
	}
	if res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("small output marked truncated")
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func testOutputTruncation(t *testing.T, b sandbox.Backend) {
	const limit = 64 << 10
	sb := create(t, b, sandbox.Spec{Limits: sandbox.Limits{OutputBytes: limit}})
	var streamed countWriter
	res := sh(t, sb, `head -c 5000000 /dev/zero; head -c 3000000 /dev/zero >&2; echo done >&2`, func(c *sandbox.Cmd) { c.Stdout = &streamed })
	wantCompleted(t, res, 0)
	if len(res.Stdout) != limit || !res.StdoutTruncated {
		t.Errorf("stdout: %d bytes, truncated %v; want %d, true", len(res.Stdout), res.StdoutTruncated, limit)
	}
	if len(res.Stderr) != limit || !res.StderrTruncated {
		t.Errorf("stderr: %d bytes, truncated %v; want %d, true", len(res.Stderr), res.StderrTruncated, limit)
	}
	if streamed.n != 5000000 {
		t.Errorf("streamed %d bytes of stdout, want all 5000000", streamed.n)
	}
	// Exactly the limit is not truncated.
	res = sh(t, sb, fmt.Sprintf(`head -c %d /dev/zero`, limit))
	if len(res.Stdout) != limit || res.StdoutTruncated {
		t.Errorf("exact limit: %d bytes, truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
}

func testStdin(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{})
	res := sh(t, sb, `cat; echo`, func(c *sandbox.Cmd) { c.Stdin = strings.NewReader("from stdin") })
	wantCompleted(t, res, 0)
	if string(res.Stdout) != "from stdin\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	// No stdin: a read sees end of file at once instead of blocking.
	start := time.Now()
	res = sh(t, sb, `cat; echo eof`, func(c *sandbox.Cmd) { c.Timeout = 20 * time.Second })
	wantCompleted(t, res, 0)
	if string(res.Stdout) != "eof\n" || time.Since(start) > 10*time.Second {
		t.Errorf("nil stdin: stdout %q after %v", res.Stdout, time.Since(start))
	}
}

// countSleepers is a script printing how many "sleep 1000" processes run.
const countSleepers = `n=0; for p in /proc/[0-9]*; do case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in "sleep 1000"*) n=$((n+1));; esac; done; echo $n`

func testTimeoutKillsTree(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{})
	start := time.Now()
	res := sh(t, sb, `sleep 1000 & setsid sh -c 'sleep 1000 & sleep 1000' & (trap '' TERM HUP INT; sleep 1000) & echo started; sleep 1000`,
		func(c *sandbox.Cmd) { c.Timeout = 500 * time.Millisecond })
	if res.Outcome != sandbox.OutcomeTimeout {
		t.Fatalf("outcome %s, want timeout (%q)", res.Outcome, res.Detail)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v after a 500ms deadline", d)
	}
	if string(res.Stdout) != "started\n" {
		t.Errorf("output before the deadline is lost: %q", res.Stdout)
	}
	res = sh(t, sb, countSleepers)
	wantCompleted(t, res, 0)
	if got := strings.TrimSpace(string(res.Stdout)); got != "0" {
		t.Errorf("%s sleep processes survived the timeout", got)
	}
}

func testBackgroundChild(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{})
	start := time.Now()
	// The background child holds stdout open; Exec must still return when
	// the command exits, and the child must not outlive it.
	res := sh(t, sb, `sleep 1000 & setsid sleep 1000 & echo bye`, func(c *sandbox.Cmd) { c.Timeout = 30 * time.Second })
	wantCompleted(t, res, 0)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("exec returned after %v: a background child held it", d)
	}
	res = sh(t, sb, countSleepers)
	if got := strings.TrimSpace(string(res.Stdout)); got != "0" {
		t.Errorf("%s background sleep processes outlived their command", got)
	}
}

func testContextCancel(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sleep", "1000"}, Timeout: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want context.DeadlineExceeded", err)
	}
	if res.Outcome != sandbox.OutcomeTimeout {
		t.Errorf("outcome %s, want timeout", res.Outcome)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v", d)
	}
	// The sandbox still works.
	wantCompleted(t, sh(t, sb, "true"), 0)
}

func testMemoryLimit(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 64 << 20}})
	// tail keeps the last lines of a stream with no newline: all of it.
	res := sh(t, sb, `tail /dev/zero`, func(c *sandbox.Cmd) { c.Timeout = 2 * time.Minute })
	if res.Outcome != sandbox.OutcomeResourceLimit {
		t.Fatalf("outcome %s exit %d signal %q (%q), want resource_limit", res.Outcome, res.ExitCode, res.Signal, res.Detail)
	}
	wantCompleted(t, sh(t, sb, "echo alive"), 0)
}

func testForkBomb(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{Limits: sandbox.Limits{Pids: 64}})
	start := time.Now()
	res := sh(t, sb, `f() { f | f & f | f; }; f`, func(c *sandbox.Cmd) { c.Timeout = 5 * time.Second })
	if res.Outcome != sandbox.OutcomeResourceLimit && res.Outcome != sandbox.OutcomeTimeout {
		t.Fatalf("outcome %s exit %d (%q), want resource_limit or timeout", res.Outcome, res.ExitCode, res.Detail)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the bomb ran %v past a 5s deadline", d)
	}
	res = sh(t, sb, `echo alive; `+`n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n`)
	wantCompleted(t, res, 0)
	f := strings.Fields(string(res.Stdout))
	if len(f) != 2 || f[0] != "alive" {
		t.Fatalf("after the bomb: %q", res.Stdout)
	}
	if n, _ := strconv.Atoi(f[1]); n > 10 {
		t.Errorf("%d processes left after the bomb", n)
	}
}

func testTmpCap(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{Limits: sandbox.Limits{TmpBytes: 1 << 20}})
	res := sh(t, sb, `echo small > /tmp/small && head -c 4000000 /dev/zero > /tmp/big`)
	if res.ExitCode == 0 {
		t.Fatalf("writing 4 MB to a 1 MiB /tmp succeeded (%s)", res.Outcome)
	}
	if res.Outcome != sandbox.OutcomeResourceLimit || !res.DiskFull {
		t.Fatalf("outcome %s, disk full %v (%q), want resource_limit, true", res.Outcome, res.DiskFull, res.Detail)
	}
	// /tmp persists between commands, within its cap.
	res = sh(t, sb, `cat /tmp/small; wc -c < /tmp/big`)
	wantCompleted(t, res, 0)
	f := strings.Fields(string(res.Stdout))
	if len(f) != 2 || f[0] != "small" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	if n, _ := strconv.Atoi(f[1]); n > 1<<20 {
		t.Errorf("/tmp/big holds %d bytes, over the 1 MiB cap", n)
	}
}

// hostFree is the free space of the host file system that holds the
// backends' temporary folders (workspace copies) by default.
func hostFree(t *testing.T) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// mountsAt lists this process's mount points at or below path
// (capfs.Under).
func mountsAt(t *testing.T, path string) []string {
	t.Helper()
	out, err := capfs.Under(path)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testDiskCap: the workspace holds at most Limits.DiskBytes (files
// included), the writes past it fail with ENOSPC as resource_limit with
// DiskFull, and nothing reaches the host's disk or another sandbox.
func testDiskCap(t *testing.T, b sandbox.Backend) {
	const limit = 8 << 20
	ctx := context.Background()
	t.Run("snapshot too big", func(t *testing.T) {
		src := Workspace(t)
		if err := os.WriteFile(filepath.Join(src, "blob.bin"), make([]byte, 2*limit), 0o644); err != nil {
			t.Fatal(err)
		}
		sb, err := b.Create(ctx, sandbox.Spec{Workspace: src, Limits: sandbox.Limits{DiskBytes: limit}})
		if err == nil {
			sb.Close()
			t.Fatalf("a %d-byte task fits a %d-byte workspace", 2*limit, limit)
		}
		if !errors.Is(err, sandbox.ErrSetup) {
			t.Fatalf("error %v, want ErrSetup", err)
		}
	})
	free := hostFree(t)
	sb := create(t, b, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: limit}})
	other := create(t, b, sandbox.Spec{Limits: sandbox.Limits{DiskBytes: limit}})
	ws := sb.HostWorkspace()
	if len(mountsAt(t, ws)) == 0 {
		t.Fatalf("the workspace %s is not a mount of its own", ws)
	}
	// 512 MiB asked for, 8 MiB given.
	res := sh(t, sb, `echo small > small.txt && head -c 536870912 /dev/zero > big`)
	if res.ExitCode == 0 || res.Outcome != sandbox.OutcomeResourceLimit || !res.DiskFull {
		t.Fatalf("filling the workspace: exit %d outcome %s disk full %v (%q), want nonzero, resource_limit, true; stderr %q",
			res.ExitCode, res.Outcome, res.DiskFull, res.Detail, res.Stderr)
	}
	if !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Errorf("stderr %q, want ENOSPC", res.Stderr)
	}
	if fi, err := os.Stat(filepath.Join(ws, "big")); err != nil || fi.Size() > limit {
		t.Errorf("host workspace big: %v %v, want at most %d bytes", fi, err, limit)
	}
	if lost := free - hostFree(t); lost > 256<<20 {
		t.Errorf("the host file system lost %d bytes of free space", lost)
	}
	// Empty files take no space but are capped in number too.
	res = sh(t, sb, `rm big && python3 -c '
import os
os.mkdir("many")
for i in range(1000000):
    open("many/%d" % i, "w").close()
'`)
	if res.ExitCode == 0 || res.Outcome != sandbox.OutcomeResourceLimit || !res.DiskFull {
		t.Fatalf("a million files: exit %d outcome %s disk full %v (%q); stderr %q", res.ExitCode, res.Outcome, res.DiskFull, res.Detail, res.Stderr)
	}
	// Freed, the workspace works again, and kept what fit.
	res = sh(t, sb, `rm -r many && cat small.txt && echo ok > after.txt && cat after.txt`)
	wantCompleted(t, res, 0)
	if string(res.Stdout) != "small\nok\n" || res.DiskFull {
		t.Errorf("after freeing: stdout %q, disk full %v", res.Stdout, res.DiskFull)
	}
	// The other sandbox was never short of space.
	res = sh(t, other, `head -c 4000000 /dev/zero > f && head -c 1000000 /dev/zero > /tmp/f && echo ok`)
	wantCompleted(t, res, 0)
	if string(res.Stdout) != "ok\n" || res.DiskFull {
		t.Errorf("the other sandbox: stdout %q, disk full %v", res.Stdout, res.DiskFull)
	}
	// A command that fills the workspace and exits 0 is completed, but
	// the Result says the disk was full.
	res = sh(t, other, `head -c 536870912 /dev/zero > f 2>/dev/null; echo all tests passed`)
	wantCompleted(t, res, 0)
	if !res.DiskFull {
		t.Errorf("disk full not recorded: %q", res.Detail)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if m := mountsAt(t, ws); len(m) > 0 {
		t.Errorf("mounts left after close: %v", m)
	}
}

// testDiskPastMemory: with a workspace bigger than the memory limit, what
// is written there fills the memory limit first (tmpfs pages are charged
// to the writer). That is resource_limit, for the command and for every
// later one, never sandbox_crash: the agent must not be able to turn its
// own excess into a masked infrastructure failure.
func testDiskPastMemory(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{Limits: sandbox.Limits{MemoryBytes: 64 << 20, DiskBytes: 256 << 20}})
	for i, script := range []string{`head -c 200000000 /dev/zero > big`, `rm -f big; echo ok`, `echo ok`} {
		res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"sh", "-c", script}, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		t.Logf("%q: outcome %s exit %d (%s)", script, res.Outcome, res.ExitCode, res.Detail)
		switch {
		case res.Outcome == sandbox.OutcomeSandboxCrash:
			t.Fatalf("%q: sandbox_crash (%s)", script, res.Detail)
		case i == 0 && res.Outcome != sandbox.OutcomeResourceLimit:
			t.Fatalf("%q: outcome %s exit %d, want resource_limit", script, res.Outcome, res.ExitCode)
		}
	}
}

// hostListener listens on the host outside any sandbox and fails the test
// if anything connects.
func hostListener(t *testing.T, network, addr string) int {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("host listener %s: %v", addr, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err == nil {
			t.Errorf("a sandbox reached the host listener on %s", l.Addr())
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func testNoNetwork(t *testing.T, b sandbox.Backend) {
	p4 := hostListener(t, "tcp4", "127.0.0.1:0")
	tests := []struct{ name, script string }{
		{"tcp 127.0.0.1", fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d`, p4)},
		{"dns", `getent hosts example.com`},
		{"metadata", `exec 3<>/dev/tcp/169.254.169.254/80`},
		{"public", `exec 3<>/dev/tcp/1.1.1.1/53`},
	}
	if l, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		l.Close()
		p6 := hostListener(t, "tcp6", "[::1]:0")
		tests = append(tests, struct{ name, script string }{"tcp ::1", fmt.Sprintf(`exec 3<>/dev/tcp/::1/%d`, p6)})
	}
	sb := create(t, b, sandbox.Spec{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"bash", "-c", tt.script}, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome == sandbox.OutcomeCompleted && res.ExitCode == 0 {
				t.Fatalf("connected: stdout %q stderr %q", res.Stdout, res.Stderr)
			}
		})
	}
}

func testListen(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{})
	ctx := context.Background()
	l, err := sb.Listen(ctx, 0)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the host "+r.URL.Path)
	})}
	go srv.Serve(l)
	defer srv.Close()
	port := l.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && printf 'GET /x HTTP/1.0\r\nHost: sandbox\r\n\r\n' >&3 && cat <&3`, port)
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"bash", "-c", script}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wantCompleted(t, res, 0)
	if !strings.Contains(string(res.Stdout), "hello from the host /x") {
		t.Fatalf("response %q", res.Stdout)
	}
	// The listener is not reachable from the host's own network.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
		// A different listener may own that port on the host; it must not be ours.
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "GET /x HTTP/1.0\r\n\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.Contains(line, "200") {
			t.Errorf("the sandbox listener answers on the host's 127.0.0.1:%d", port)
		}
	}
	// A second listener on a fixed port.
	l2, err := sb.Listen(ctx, port+1)
	if err != nil {
		t.Fatalf("listen on port %d: %v", port+1, err)
	}
	defer l2.Close()
	if p := l2.Addr().(*net.TCPAddr).Port; p != port+1 {
		t.Errorf("listener on port %d, want %d", p, port+1)
	}
}

func testHostSecrets(t *testing.T, b sandbox.Backend, canary string) {
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte(canary), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := create(t, b, sandbox.Spec{})
	res := sh(t, sb, `cat /etc/shadow; cat /proc/1/environ; for f in /proc/[0-9]*/environ; do cat $f; done; ls -A /root; cat `+secret+`; echo end`)
	out := string(res.Stdout) + string(res.Stderr)
	if strings.Contains(out, canary) {
		t.Errorf("host environment or host files leaked: %q", out)
	}
	if !strings.Contains(string(res.Stdout), "end") {
		t.Fatalf("script did not run: %q", out)
	}
	if host, err := os.ReadFile("/etc/shadow"); err == nil {
		for _, line := range strings.Split(string(host), "\n") {
			if f := strings.SplitN(line, ":", 3); len(f) == 3 && len(f[1]) > 2 {
				if strings.Contains(out, f[1]) {
					t.Errorf("the host's password hash of %s is readable", f[0])
				}
			}
		}
	}
	common := map[string]bool{".bashrc": true, ".profile": true, ".cache": true, ".config": true, ".local": true}
	if entries, err := os.ReadDir("/root"); err == nil {
		for _, e := range entries {
			if !common[e.Name()] && strings.Contains(string(res.Stdout), "\n"+e.Name()+"\n") {
				t.Errorf("host /root/%s is visible", e.Name())
			}
		}
	}
}

func testHostProcesses(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{})
	res := sh(t, sb, `n=0; for p in /proc/[0-9]*; do n=$((n+1)); tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done; echo count $n`)
	wantCompleted(t, res, 0)
	out := string(res.Stdout)
	if strings.Contains(out, os.Args[0]) {
		t.Errorf("the host test process is visible: %q", out)
	}
	var n int
	fmt.Sscanf(out[strings.LastIndex(out, "count "):], "count %d", &n)
	if n == 0 || n > 10 {
		t.Errorf("%d processes visible inside (want only the sandbox's own): %q", n, out)
	}
}

func testHostname(t *testing.T, b sandbox.Backend) {
	host, _ := os.Hostname()
	sb := create(t, b, sandbox.Spec{})
	res := sh(t, sb, `cat /proc/sys/kernel/hostname`)
	wantCompleted(t, res, 0)
	if got := strings.TrimSpace(string(res.Stdout)); got == "" || got == host {
		t.Errorf("hostname inside %q, host %q", got, host)
	}
}

// testOpenFiles: a command starts with its three standard descriptors and
// nothing else: not the backend's own channel to the host (through which a
// command could answer for the sandbox, an exit status included) and no
// descriptor of the host process, such as the pipe opened here without
// close-on-exec.
func testOpenFiles(t *testing.T, b sandbox.Backend) {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil { // no close-on-exec
		t.Fatal(err)
	}
	defer syscall.Close(p[0])
	defer syscall.Close(p[1])
	sb := create(t, b, sandbox.Spec{})
	res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"ls", "/proc/self/fd"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wantCompleted(t, res, 0)
	// 3 is the folder ls itself opened to list.
	if got := strings.Fields(string(res.Stdout)); strings.Join(got, " ") != "0 1 2 3" {
		t.Errorf("a command's open descriptors: %v, want 0 1 2 (and ls's own 3)", got)
	}
}

func testNoTTY(t *testing.T, b sandbox.Backend) {
	sb := create(t, b, sandbox.Spec{})
	for _, script := range []string{
		`exec 3<>/dev/tty`,
		`python3 -c 'import fcntl, termios, sys
for fd in (0, 1, 2):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        sys.exit(0)
    except OSError:
        pass
sys.exit(1)'`,
	} {
		res := sh(t, sb, script)
		if res.Outcome == sandbox.OutcomeCompleted && res.ExitCode == 0 {
			t.Errorf("%q succeeded: a terminal is reachable", script)
		}
		if bytes.Contains(res.Stderr, []byte("not found")) {
			t.Errorf("%q: %s", script, res.Stderr)
		}
	}
	res := sh(t, sb, `ps -o tty= -p $$ 2>/dev/null || cat /proc/$$/stat`)
	if f := strings.Fields(string(res.Stdout)); len(f) > 6 && f[6] != "0" {
		t.Errorf("the command has a controlling terminal: tty_nr %s", f[6])
	}
}

func testConcurrent(t *testing.T, b sandbox.Backend) {
	const n = 6
	src := Workspace(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			sb, err := b.Create(ctx, sandbox.Spec{Workspace: src})
			if err != nil {
				errs <- err
				return
			}
			defer sb.Close()
			script := fmt.Sprintf(`echo %d > mine.txt; sleep 0.2; ls; echo %d > /tmp/t; sleep 0.2; cat /tmp/t`, i, i)
			res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sh", "-c", script}, Timeout: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			want := fmt.Sprintf("bin\nhello.txt\nkeep\nmine.txt\nsub\n%d\n", i)
			if string(res.Stdout) != want {
				errs <- fmt.Errorf("sandbox %d: stdout %q, want %q", i, res.Stdout, want)
			}
			if b, err := os.ReadFile(filepath.Join(sb.HostWorkspace(), "mine.txt")); err != nil || string(b) != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("sandbox %d: host mine.txt %q %v", i, b, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testClose(t *testing.T, b sandbox.Backend) {
	sb, err := b.Create(context.Background(), sandbox.Spec{Workspace: Workspace(t)})
	if err != nil {
		t.Fatal(err)
	}
	ws := sb.HostWorkspace()
	if err := sb.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("exec after close: %v, want ErrClosed", err)
	}
	if _, err := sb.Listen(context.Background(), 0); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("listen after close: %v, want ErrClosed", err)
	}
	if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace %s left after close: %v", ws, err)
	}
	if m := mountsAt(t, ws); len(m) > 0 {
		t.Errorf("mounts left after close: %v", m)
	}
}
