package runner

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/legorl/legorl/proxy/listen"
)

// TestJobServerOnAddress starts a job server at a non-loopback address of
// a network namespace made for the test: it answers there and refuses
// connections at loopback, the opposite of the default binding.
func TestJobServerOnAddress(t *testing.T) {
	if os.Getenv(netnsChild) == "" {
		rerunInNetns(t, "TestJobServerOnAddress")
		return
	}
	setUpNetns(t)
	addr, err := listen.Parse(testAddr+":0", true, "--listen", "--expose")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := ServeJobServer(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(ep)
	if host != testAddr {
		t.Fatalf("endpoint %s, want host %s", ep, testAddr)
	}
	c, err := net.DialTimeout("tcp", ep, 5*time.Second)
	if err != nil {
		t.Fatalf("the job server does not answer at %s: %v", ep, err)
	}
	c.Close()
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 5*time.Second); err == nil {
		c.Close()
		t.Errorf("the job server bound to %s accepted a connection at 127.0.0.1:%s", testAddr, port)
	}
	t.Logf("checked from %s", testAddr)
}
