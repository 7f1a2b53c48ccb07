//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/local"
	"github.com/legorl/legorl/sandbox/sandboxtest"
)

// TestCycles: 1,000 sandboxes created, used and closed, 8 at a time, leave
// nothing behind, checked from /proc and /sys: no process of any
// sandbox's uid, no holder, no mount under any sandbox's folder, no folder,
// no cgroup, and once the backend is closed no process or network
// namespace of the test's process tree. The figures are logged for docs/PERFORMANCE.md; nothing is
// timed.
func TestCycles(t *testing.T) {
	const cycles, parallel = 1000, 8
	if testing.Short() {
		t.Skip("1,000 sandbox cycles")
	}
	ws := sandboxtest.Workspace(t)
	b := backend(t, local.Options{})
	type left struct {
		uid, holder int
		dir         string
		cgs         []string
	}
	var (
		mu    sync.Mutex
		seen  []left
		fails []string
	)
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				err := func() error {
					sb, err := b.Create(context.Background(), sandbox.Spec{Workspace: ws})
					if err != nil {
						return err
					}
					l := left{local.HostUID(sb), local.HolderPid(sb), local.SandboxDir(sb), local.CgroupDirs(sb)}
					mu.Lock()
					seen = append(seen, l)
					mu.Unlock()
					res, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"sh", "-c", "echo " + strconv.Itoa(i) + " >> hello.txt && tail -1 hello.txt"}, Timeout: time.Minute})
					if err == nil && strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(i) {
						err = errors.New("exec: stdout " + strconv.Quote(string(res.Stdout)))
					}
					if cerr := sb.Close(); err == nil {
						err = cerr
					}
					return err
				}()
				if err != nil {
					mu.Lock()
					fails = append(fails, err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	for i := range cycles {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	if len(fails) > 0 {
		t.Fatalf("%d of %d cycles failed, the first: %s", len(fails), cycles, fails[0])
	}
	if len(seen) != cycles {
		t.Fatalf("%d sandboxes made, want %d", len(seen), cycles)
	}
	uids := map[int]bool{}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range seen {
		uids[l.uid] = true
		if err := syscall.Kill(l.holder, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("holder %d of %s: %v, want ESRCH", l.holder, l.dir, err)
		}
		if _, err := os.Stat(l.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("folder %s left", l.dir)
		}
		if strings.Contains(string(mounts), " "+l.dir) {
			t.Errorf("mounts under %s left", l.dir)
		}
		for _, d := range l.cgs {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cgroup %s left", d)
			}
		}
	}
	var stray []int
	for _, pid := range processesOf(-1) {
		if uid, ok := realUID(pid); ok && uids[uid] {
			stray = append(stray, pid)
		}
	}
	if len(stray) > 0 {
		t.Errorf("processes of sandbox uids left: %v", stray)
	}
	// With the backend closed, no process of this test's tree is left
	// (helpers, holders, inits), and so no network namespace but ours: the
	// host-wide counts would also see other programs on a shared machine.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	var desc []int
	netns := map[string]bool{}
	settleFor(10*time.Second, func() bool {
		desc, netns = descendants(os.Getpid())
		return len(desc) == 0
	})
	own, _ := os.Readlink("/proc/self/ns/net")
	delete(netns, own)
	if len(desc) > 0 || len(netns) > 0 {
		t.Errorf("after Close: processes %v of this test left, network namespaces %v", desc, netns)
	}
	t.Logf("%d cycles (create, exec, close), %d at a time, in %v (%.1f ms each, wall); %d distinct uids; nothing left",
		cycles, parallel, elapsed.Round(time.Millisecond), float64(elapsed.Milliseconds())/cycles, len(uids))
}

// descendants lists the processes below pid and their network namespaces.
func descendants(pid int) ([]int, map[string]bool) {
	var out []int
	netns := map[string]bool{}
	for _, p := range processesOf(-1) {
		for q := parentOf(strconv.Itoa(p)); q > 1; q = parentOf(strconv.Itoa(q)) {
			if q == pid {
				out = append(out, p)
				if l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "ns", "net")); err == nil {
					netns[l] = true
				}
				break
			}
		}
	}
	return out, netns
}

// settleFor polls cond every 50 ms until it holds or d passes.
func settleFor(d time.Duration, cond func() bool) {
	for end := time.Now().Add(d); !cond() && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
	}
}

// realUID is a process's real uid.
func realUID(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid, err := strconv.Atoi(f[1])
			return uid, err == nil
		}
	}
	return 0, false
}
