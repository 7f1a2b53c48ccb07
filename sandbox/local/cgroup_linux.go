//go:build linux

package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/legorl/legorl/sandbox/internal/cgroupfs"
)

// cgroup is one sandbox's control groups: memory, pids and cpu, in the v1
// hierarchies (one folder per controller) or in the unified v2 hierarchy
// (one folder). Each is created under the host process's own group.
type cgroup struct {
	v2   bool
	dirs map[string]string // controller ("memory", "pids", "cpu"; "" for v2) -> folder
	lim  cgroupLimits      // as last written
	// The files of the OOM-kill and pids-limit event counts, kept open:
	// every Exec reads both.
	oomEvents, pidsEvents *cgroupfs.File
}

// cgroupLimits are the limits a cgroup enforces.
type cgroupLimits struct {
	memory int64
	pids   int
	cpus   float64
}

// cgroupCounters are the events that turn an exec into resource_limit.
type cgroupCounters struct{ oomKills, pidsMax uint64 }

// newCgroup creates the groups named name and writes the limits.
func newCgroup(name string, lim cgroupLimits) (*cgroup, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	c := &cgroup{dirs: map[string]string{}}
	if _, err := os.Stat(filepath.Join(cgroupfs.Root, "cgroup.controllers")); err == nil {
		c.v2 = true
		parent := filepath.Join(cgroupfs.Root, own[""])
		// Enabling controllers fails when the parent holds processes (the
		// no-internal-process rule); the check below then says so.
		os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0)
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		c.dirs[""] = dir
		ctrls, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		for _, want := range []string{"memory", "pids", "cpu"} {
			if !bytes.Contains(ctrls, []byte(want)) {
				c.remove()
				return nil, fmt.Errorf("cgroup v2: controller %s not enabled in %s", want, parent)
			}
		}
		if err := writeAll(dir, [][2]string{{"memory.swap.max", "0"}}); err != nil {
			c.remove()
			return nil, err
		}
	} else {
		for _, ctl := range []string{"memory", "pids", "cpu"} {
			path, ok := own[ctl]
			if !ok {
				c.remove()
				return nil, fmt.Errorf("cgroup v1: no %s hierarchy in /proc/self/cgroup", ctl)
			}
			dir := filepath.Join(cgroupfs.Root, ctl, path, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				c.remove()
				return nil, fmt.Errorf("cgroup: %w", err)
			}
			c.dirs[ctl] = dir
		}
		if err := writeAll(c.dirs["cpu"], [][2]string{{"cpu.cfs_period_us", "100000"}}); err != nil {
			c.remove()
			return nil, err
		}
	}
	if err := c.setLimits(lim); err != nil {
		c.remove()
		return nil, err
	}
	oom, pids := filepath.Join(c.dirs["memory"], "memory.oom_control"), filepath.Join(c.dirs["pids"], "pids.events")
	if c.v2 {
		oom, pids = filepath.Join(c.dirs[""], "memory.events"), filepath.Join(c.dirs[""], "pids.events")
	}
	if c.oomEvents, err = cgroupfs.Open(oom); err != nil {
		c.remove()
		return nil, err
	}
	if c.pidsEvents, err = cgroupfs.Open(pids); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// setLimits writes the limits that differ from those last written: a
// cgroup made ahead of need, with the default limits, usually needs no
// write at all.
func (c *cgroup) setLimits(lim cgroupLimits) error {
	var mem, pids, cpu [][2]string
	if lim.memory != c.lim.memory {
		m := strconv.FormatInt(lim.memory, 10)
		if c.v2 {
			mem = [][2]string{{"memory.max", m}}
		} else {
			// Memory plus swap, where the kernel accounts swap: no swapping
			// out of the limit. It may never be below the memory limit, so
			// when the limit grows it is raised first, else lowered after.
			memsw := [][2]string{}
			if _, err := os.Stat(filepath.Join(c.dirs["memory"], "memory.memsw.limit_in_bytes")); err == nil {
				memsw = [][2]string{{"memory.memsw.limit_in_bytes", m}}
			}
			mem = [][2]string{{"memory.limit_in_bytes", m}}
			if c.lim.memory != 0 && lim.memory > c.lim.memory {
				mem = append(memsw, mem...)
			} else {
				mem = append(mem, memsw...)
			}
		}
	}
	if lim.pids != c.lim.pids {
		pids = [][2]string{{"pids.max", strconv.Itoa(lim.pids)}}
	}
	if lim.cpus != c.lim.cpus {
		quota := strconv.FormatInt(int64(lim.cpus*100000), 10)
		if c.v2 {
			cpu = [][2]string{{"cpu.max", quota + " 100000"}}
		} else {
			cpu = [][2]string{{"cpu.cfs_quota_us", quota}}
		}
	}
	for _, w := range []struct {
		ctl string
		kv  [][2]string
	}{{"memory", mem}, {"pids", pids}, {"cpu", cpu}} {
		if len(w.kv) == 0 {
			continue
		}
		if err := writeAll(c.dir(w.ctl), w.kv); err != nil {
			return err
		}
	}
	c.lim = lim
	return nil
}

// dir is the folder of a controller's group.
func (c *cgroup) dir(ctl string) string {
	if c.v2 {
		return c.dirs[""]
	}
	return c.dirs[ctl]
}

func writeAll(dir string, kv [][2]string) error {
	for _, e := range kv {
		if err := os.WriteFile(filepath.Join(dir, e[0]), []byte(e[1]), 0); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	return nil
}

// ownCgroups maps each v1 controller (and "" for v2) to the host process's
// group path, from /proc/self/cgroup.
func ownCgroups() (map[string]string, error) {
	own, err := cgroupfs.Of(0)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return own, nil
}

// add moves the process pid into every group.
func (c *cgroup) add(pid int) error {
	for _, dir := range c.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	return nil
}

// counters reads the OOM-kill and pids-limit event counts.
func (c *cgroup) counters() cgroupCounters {
	if c == nil {
		return cgroupCounters{}
	}
	return cgroupCounters{oomKills: c.oomEvents.ReadKey("oom_kill"), pidsMax: c.pidsEvents.ReadKey("max")}
}

// remove deletes the groups; it waits briefly for dying processes to leave.
func (c *cgroup) remove() error {
	if c == nil {
		return nil
	}
	for _, f := range []*cgroupfs.File{c.oomEvents, c.pidsEvents} {
		if f != nil {
			f.Close()
		}
	}
	c.oomEvents, c.pidsEvents = nil, nil
	var errs []error
	for ctl, dir := range c.dirs {
		var err error
		for i := 0; i < 200; i++ {
			err = syscall.Rmdir(dir)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			if !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", dir, err))
		} else {
			delete(c.dirs, ctl)
		}
	}
	return errors.Join(errs...)
}
