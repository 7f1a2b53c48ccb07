//go:build linux

package local_test

import (
	"os"
	"strings"
	"testing"

	"github.com/legorl/legorl/sandbox"
	"github.com/legorl/legorl/sandbox/local/initproc"
)

// TestRootMatchesTables: a sandbox of the shipped init has the shape
// initproc's tables declare (the tables the C init is generated from): its
// host name, each of its own mounts with its type and flags, each device,
// each /dev link, each masked file empty when the host has it, and each
// system folder read-only.
func TestRootMatchesTables(t *testing.T) {
	sb := newSandbox(t, sandbox.Spec{})
	res := run(t, sb, `hostname; echo ---; cat /proc/self/mountinfo`)
	host, mountinfo, _ := strings.Cut(string(res.Stdout), "---\n")
	if strings.TrimSpace(host) != initproc.Hostname {
		t.Errorf("host name %q, want %q", host, initproc.Hostname)
	}
	// mountinfo: ID PARENT MAJ:MIN ROOT TARGET OPTIONS [TAGS] - FSTYPE SOURCE SUPER
	type mnt struct{ opts, fstype string }
	mounts := map[string]mnt{}
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 1 {
			continue
		}
		mounts[f[4]] = mnt{f[5], g[0]}
	}
	for _, m := range initproc.Mounts() {
		got, ok := mounts[m.Target]
		if !ok || got.fstype != m.FSType {
			t.Errorf("%s: mounted %v (%+v), want %s", m.Target, ok, got, m.FSType)
			continue
		}
		for _, f := range []struct {
			on   bool
			name string
		}{{m.NoSuid, "nosuid"}, {m.NoDev, "nodev"}, {m.NoExec, "noexec"}} {
			if f.on && !strings.Contains(","+got.opts+",", ","+f.name+",") {
				t.Errorf("%s: options %s lack %s", m.Target, got.opts, f.name)
			}
		}
	}
	var script []string
	for _, d := range initproc.Devices() {
		script = append(script, "test -c /dev/"+d+" || echo 'no device /dev/"+d+"'")
	}
	for _, l := range initproc.DevLinks() {
		script = append(script, `test "$(readlink `+l.Path+`)" = `+l.Dest+` || echo 'no link `+l.Path+`'`)
	}
	for _, f := range initproc.MaskedFiles() {
		if _, err := os.Stat(f); err == nil {
			script = append(script, "test -e "+f+" && ! test -s "+f+" || echo '"+f+" not masked'")
		}
	}
	for _, p := range initproc.SystemPaths() {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			script = append(script, "! touch "+p+"/.w 2>/dev/null || echo '"+p+" writable'")
		}
	}
	if out := run(t, sb, strings.Join(script, "\n")).Stdout; len(out) > 0 {
		t.Errorf("the sandbox is not what the tables say:\n%s", out)
	}
}
