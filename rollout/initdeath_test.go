package rollout

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/legorl/legorl/harness"
	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/schemas"
)

// dyingBackend makes the real local sandboxes, and kills each one's init
// (every host process of its uid, the workspace's owner) from the host
// just before the first command: what a crashed or faulted init looks like
// to the host.
type dyingBackend struct{ sandbox.Backend }

func (b dyingBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := b.Backend.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &dyingSandbox{Sandbox: sb}, nil
}

type dyingSandbox struct {
	sandbox.Sandbox
	once sync.Once
}

func (s *dyingSandbox) Exec(ctx context.Context, c sandbox.Cmd) (sandbox.Result, error) {
	s.once.Do(func() {
		fi, err := os.Stat(s.HostWorkspace())
		if err != nil {
			return
		}
		uid := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid))
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			b, err := os.ReadFile("/proc/" + e.Name() + "/status")
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == uid {
					if pid, err := strconv.Atoi(e.Name()); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		}
	})
	return s.Sandbox.Exec(ctx, c)
}

// TestInitDeathMasked: when the sandbox's init dies under the agent, the
// rollout ends masked as a sandbox crash with a one-line error, ungraded,
// and promptly.
func TestInitDeathMasked(t *testing.T) {
	setup(t)
	cfg := config(newTap(t, &scripted{tok: fx.tok, texts: []string{"nothing"}}, 0), harness.Bash(), "init-death")
	cfg.Backend = dyingBackend{fx.backend}
	row, _, _ := mustRun(t, cfg)
	if row.Status != schemas.StatusMasked || row.Termination != schemas.TerminationSandboxCrash || row.Reward != 0 ||
		!strings.HasPrefix(row.Error, "agent: ") || strings.Contains(row.Error, "\n") {
		t.Fatalf("row %s/%s reward %v error %q, want masked sandbox_crash with one line", row.Status, row.Termination, row.Reward, row.Error)
	}
	if row.GradeSeconds != 0 {
		t.Error("a masked rollout was graded")
	}
}
