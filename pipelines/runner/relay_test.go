package runner

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestRelay relays localhost:PORT to another address with the same port
// (127.0.0.2, also loopback on Linux): what is sent comes back through it,
// and stop closes it.
func TestRelay(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				c.Write([]byte("echo " + line))
			}()
		}
	}()
	stop, err := StartRelay(context.Background(), target.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(target.Addr().(*net.TCPAddr).Port)
	for i := range 3 {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("hi " + strconv.Itoa(i) + "\n"))
		got, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if want := "echo hi " + strconv.Itoa(i) + "\n"; err != nil || got != want {
			t.Errorf("through the relay: %q, %v; want %q", got, err, want)
		}
	}
	stop()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Error("the relay still accepts after stop")
	}
	// The port is taken now by nobody; a relay for a target whose port is
	// taken here fails with ErrRelay.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, err = StartRelay(context.Background(), "127.0.0.2:"+strconv.Itoa(busy.Addr().(*net.TCPAddr).Port))
	if !errors.Is(err, ErrRelay) {
		t.Errorf("relay to a port taken here: %v", err)
	}
	if _, err := StartRelay(context.Background(), "no-port"); !errors.Is(err, ErrRelay) {
		t.Errorf("bad target: %v", err)
	}
}
