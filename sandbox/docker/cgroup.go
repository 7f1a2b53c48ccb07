package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/legorl/legorl/sandbox/internal/cgroupfs"
)

// cgroups are the host folders of a container's cgroups, read from the
// host side: the engine does not report OOM kills of exec'd processes or
// refused forks, and cannot kill an exec's process tree, but the cgroup
// files can. Works with cgroup v1 (one folder per controller) and v2 (one
// unified folder, where every field below is the same folder).
type cgroups struct {
	v2      bool
	memory  string
	pids    string
	freezer string
}

// findCgroups reads /proc/PID/cgroup of the container's init.
func findCgroups(pid int) (cgroups, error) {
	own, err := cgroupfs.Of(pid)
	if err != nil {
		return cgroups{}, fmt.Errorf("cgroups of pid %d: %w", pid, err)
	}
	var cg cgroups
	for ctl, field := range map[string]*string{"memory": &cg.memory, "pids": &cg.pids, "freezer": &cg.freezer} {
		if path, ok := own[ctl]; ok {
			*field = filepath.Join(cgroupfs.Root, ctl, path)
		}
	}
	if unified := own[""]; cg.memory == "" && cg.pids == "" && unified != "" {
		dir := filepath.Join(cgroupfs.Root, unified)
		cg = cgroups{v2: true, memory: dir, pids: dir, freezer: dir}
	}
	if cg.pids == "" {
		return cgroups{}, fmt.Errorf("cgroups of pid %d: no pids cgroup found", pid)
	}
	return cg, nil
}

// oomKills is how many processes the memory cgroup's OOM killer has
// killed (0 when unknown).
func (cg cgroups) oomKills() int64 {
	file := "memory.events"
	if !cg.v2 {
		file = "memory.oom_control"
	}
	return int64(cgroupfs.ReadKey(filepath.Join(cg.memory, file), "oom_kill"))
}

// pidsRefused is how many forks the pids limit has refused.
func (cg cgroups) pidsRefused() int64 {
	return int64(cgroupfs.ReadKey(filepath.Join(cg.pids, "pids.events"), "max"))
}

// execGroup is the child cgroup of one Exec (in the pids and freezer
// hierarchies on v1; one unified folder on v2). The program is moved in
// before it can fork, so everything it starts stays inside: inside the
// container nobody can write cgroup files. Killing the group kills the
// exec's whole tree, daemons and setsid'd children included, and nothing
// of other Execs.
type execGroup struct {
	v2      bool
	pids    string // holds cgroup.procs and pids.events
	freezer string // empty without a freezer
}

// newExecGroup makes the child cgroups named name.
func (cg cgroups) newExecGroup(name string) (*execGroup, error) {
	g := &execGroup{v2: cg.v2, pids: filepath.Join(cg.pids, name)}
	if err := os.Mkdir(g.pids, 0o755); err != nil {
		return nil, fmt.Errorf("exec cgroup: %w", err)
	}
	switch {
	case cg.v2:
		g.freezer = g.pids
	case cg.freezer != "":
		g.freezer = filepath.Join(cg.freezer, name)
		if err := os.Mkdir(g.freezer, 0o755); err != nil {
			os.Remove(g.pids)
			return nil, fmt.Errorf("exec cgroup: %w", err)
		}
	}
	return g, nil
}

// add moves pid into the group.
func (g *execGroup) add(pid int) error {
	for _, dir := range g.dirs() {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("exec cgroup: move %d: %w", pid, err)
		}
	}
	return nil
}

func (g *execGroup) dirs() []string {
	if g.freezer == "" || g.freezer == g.pids {
		return []string{g.pids}
	}
	return []string{g.pids, g.freezer}
}

// refused is how many forks in the group the pids limit refused (v1
// counts a refusal in the forking task's cgroup).
func (g *execGroup) refused() int64 {
	return int64(cgroupfs.ReadKey(filepath.Join(g.pids, "pids.events"), "max"))
}

// kill SIGKILLs every process in the group until none is left.
func (g *execGroup) kill() error {
	return killAll(g.pids, g.freezer, g.v2, 0)
}

// remove deletes the (empty) group, waiting briefly for killed processes
// to leave it.
func (g *execGroup) remove() error {
	var err error
	for _, dir := range g.dirs() {
		err = errors.Join(err, rmdirRetry(dir))
	}
	return err
}

// rmdirRetry removes a cgroup folder; EBUSY while its last processes exit.
func rmdirRetry(dir string) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeLeftovers deletes exec groups (and then the container's own pids
// and freezer folders, if the engine could not) after the container is
// gone. The engine removes a container's cgroups itself but fails on a
// folder that still has children.
func (cg cgroups) removeLeftovers() error {
	var err error
	for _, dir := range []string{cg.pids, cg.freezer} {
		if dir == "" {
			continue
		}
		children, _ := filepath.Glob(filepath.Join(dir, execGroupPrefix+"*"))
		for _, c := range children {
			err = errors.Join(err, rmdirRetry(c))
		}
		if len(children) > 0 {
			err = errors.Join(err, rmdirRetry(dir))
		}
		if cg.v2 {
			break
		}
	}
	return err
}

// execGroupPrefix starts the name of every exec group.
const execGroupPrefix = "legorl-exec-"

// procs lists the pids in the cgroup folder dir.
func procs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// freeze stops (true) or resumes (false) every process in the freezer
// folder dir, so a fork bomb cannot outrun the kill loop. Best effort:
// without a freezer the loop still converges, only slower.
func freeze(dir string, v2, on bool) {
	if dir == "" {
		return
	}
	if v2 {
		v := "0"
		if on {
			v = "1"
		}
		os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte(v), 0)
		return
	}
	v := "THAWED"
	if on {
		v = "FROZEN"
	}
	os.WriteFile(filepath.Join(dir, "freezer.state"), []byte(v), 0)
}

// errSurvivors: processes were still alive after the kill loop.
var errSurvivors = errors.New("processes survived the kill")

// killAll SIGKILLs every process in the cgroup folder procsDir except keep
// (0: none), repeating until none is left, for at most a few seconds.
func killAll(procsDir, freezerDir string, v2 bool, keep int) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		freeze(freezerDir, v2, true)
		pids, err := procs(procsDir)
		n := 0
		for _, p := range pids {
			if p != keep {
				syscall.Kill(p, syscall.SIGKILL)
				n++
			}
		}
		freeze(freezerDir, v2, false)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("list processes: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d left", errSurvivors, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
