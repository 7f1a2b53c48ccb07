package runner

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}

func double(x int) int { return 2 * x }

func init() { register.Function1x1(double) }

// TestPrismLoopbackOnly: Prism's job service (also its Fn API) answers on
// the loopback interface and refuses connections that arrive on any other,
// while a listener made the same way without the binding accepts them;
// a pipeline still runs on it with loopback workers.
//
// On a machine with no address but loopback the test reruns itself in a
// network namespace with one more interface (netns_linux_test.go): it
// fails, never passes, when no address could be checked.
func TestPrismLoopbackOnly(t *testing.T) {
	ctx := context.Background()
	if os.Getenv(netnsChild) != "" {
		setUpNetns(t)
	}
	ep, err := PrismEndpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ep)
	for _, host := range []string{"127.0.0.1", "::1"} {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 5*time.Second)
		if err != nil {
			t.Errorf("%s: %v", host, err)
			continue
		}
		c.Close()
	}
	control, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	go func() {
		for {
			c, err := control.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cport := strconv.Itoa(control.Addr().(*net.TCPAddr).Port)
	addrs, _ := net.InterfaceAddrs()
	checked := 0
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
			continue
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(n.IP.String(), cport), 5*time.Second); err != nil {
			t.Logf("%s: an unbound listener is not reachable either (%v); skipped", n.IP, err)
			continue
		} else {
			c.Close()
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(n.IP.String(), port), 5*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("prism's job service accepted a connection at %s", n.IP)
		}
		t.Logf("checked from %s", n.IP)
		checked++
	}
	if checked == 0 {
		if os.Getenv(netnsChild) != "" {
			t.Fatal("no non-loopback address to check the binding from, even in a network namespace made for it")
		}
		rerunInNetns(t, "TestPrismLoopbackOnly")
		return
	}

	p, s := beam.NewPipelineWithRoot()
	passert.Equals(s, beam.ParDo(s, double, beam.Create(s, 1, 2, 3)), 2, 4, 6)
	if _, err := Run(ctx, p, Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, opt := range []Options{
		{Runner: "dataflow"},
		{Runner: Universal},
		{Runner: Prism, Endpoint: "localhost:1"},
		{Flags: map[string]string{"no_such_flag": "1"}},
		{Flags: map[string]string{"worker": "true"}},
	} {
		p, s := beam.NewPipelineWithRoot()
		beam.Create(s, 1)
		_, err := Run(context.Background(), p, opt)
		if !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v, want ErrOptions", opt, err)
		}
	}
}
