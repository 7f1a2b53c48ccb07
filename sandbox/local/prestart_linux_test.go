//go:build linux

package local

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/legorl/legorl/sandbox/local/localtest"
)

// TestPreparedHolderDropped: a holder waiting for its sandbox (prestarted)
// has already dropped what its commands must never have: its bounding,
// inheritable and ambient sets are empty and no_new_privs is set, before
// the host has sent it anything. The seccomp filter, which would refuse
// the setup's mounts, is not installed yet.
func TestPreparedHolderDropped(t *testing.T) {
	b := New(Options{NoPrestart: true, InitPath: localtest.Init(t)})
	defer b.Close()
	h, err := b.startHolder()
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if err := h.waitPrepared(); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(h.pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CapInh:\t0000000000000000",
		"CapBnd:\t0000000000000000",
		"CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1",
		"Seccomp:\t0",
	} {
		t.Run(strings.TrimSuffix(strings.Fields(want)[0], ":"), func(t *testing.T) {
			if !strings.Contains(string(status), want+"\n") {
				t.Errorf("the prepared holder's status lacks %q:\n%s", want, status)
			}
		})
	}
}
