package runner

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// netnsChild marks a test process that runs in a network namespace of its
// own, made by rerunInNetns.
const netnsChild = "LEGORL_TEST_NETNS_CHILD"

// testAddr is the address of the extra interface in that namespace.
const testAddr = "10.99.0.1"

// rerunInNetns runs the test named by run again in a child process inside a
// new network namespace (a new user namespace too when not root) that has
// loopback and one more interface with testAddr: a dummy, or an empty
// bridge where the kernel has no dummy driver. The child fails if it finds
// no address to check from, so the check cannot pass by not running.
func rerunInNetns(t *testing.T, run string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+run+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsChild+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("the check in a network namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "checked from "+testAddr) {
		t.Fatalf("the child did not check from %s", testAddr)
	}
}

// setUpNetns, in the child, brings loopback up and adds the extra interface.
func setUpNetns(t *testing.T) {
	t.Helper()
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Logf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return err
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("the network-namespace check needs ip (iproute2; scripts/setup installs it)")
	}
	if err := ip("link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	if ip("link", "add", "legorl0", "type", "dummy") != nil {
		if err := ip("link", "add", "legorl0", "type", "bridge"); err != nil {
			t.Fatal(err)
		}
	}
	if err := ip("addr", "add", testAddr+"/24", "dev", "legorl0"); err != nil {
		t.Fatal(err)
	}
	if err := ip("link", "set", "legorl0", "up"); err != nil {
		t.Fatal(err)
	}
}
