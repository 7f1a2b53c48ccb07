package lease

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/s3test"
)

func TestMain(m *testing.M) {
	if os.Getenv("LEGORL_LEASE_HOLD") != "" {
		hold() // the other process of TestTwoProcesses
		return
	}
	s3test.Main(m)
}

// The holder's lease: short, renewed often, so the test sees renewals and
// an expiry within seconds.
const (
	holdTTL   = 2 * time.Second
	holdRenew = 200 * time.Millisecond
)

// hold is the child process: it opens the store LEGORL_LEASE_HOLD names,
// takes run "r"'s lease as owner "child-PID", says "held" on stdout and
// renews until it is killed.
func hold() {
	ctx := context.Background()
	st, err := storage.Open(ctx, os.Getenv("LEGORL_LEASE_HOLD"), storage.Options{S3Endpoint: os.Getenv("LEGORL_LEASE_ENDPOINT"),
		AccessKey: os.Getenv("LEGORL_LEASE_ACCESS"), SecretKey: os.Getenv("LEGORL_LEASE_SECRET"), Region: "us-east-1"})
	if err == nil {
		host, _ := os.Hostname()
		_, err = Acquire(ctx, st, "r", Options{Owner: fmt.Sprintf("child-%d", os.Getpid()), Host: host, PID: os.Getpid(), TTL: holdTTL, Renew: holdRenew}, nil)
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("held")
	select {}
}

// TestTwoProcesses runs a holder in another process, on the file store and
// on S3: while it renews, this process is refused with an error naming it,
// also after the holder's first TTL has passed; once it is killed
// (SIGKILL: no release), a process of another host is still refused until
// the lease expires, then takes it over; its release frees the run at
// once. A process of the holder's own host takes a dead holder's lease
// over at once.
func TestTwoProcesses(t *testing.T) {
	for _, tc := range []struct{ backend, takeover string }{{"file", "expiry"}, {"s3", "expiry"}, {"file", "same host"}, {"s3", "same host"}} {
		backend := tc.backend
		t.Run(backend+", "+tc.takeover, func(t *testing.T) {
			ctx := context.Background()
			env := os.Environ()
			var st storage.Store
			var uri string
			if backend == "file" {
				dir := t.TempDir()
				uri = "file://" + dir
				fs, err := storage.NewFileStore(dir)
				if err != nil {
					t.Fatal(err)
				}
				st = fs
			} else {
				s3 := s3test.Store(t)
				srv := s3test.Endpoint(t)
				uri = s3.URI()
				st = s3
				env = append(env, "LEGORL_LEASE_ENDPOINT="+srv.URL, "LEGORL_LEASE_ACCESS="+srv.AccessKey, "LEGORL_LEASE_SECRET="+srv.SecretKey)
			}
			self, _ := os.Executable()
			child := exec.Command(self)
			child.Env = append(env, "LEGORL_LEASE_HOLD="+uri)
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			defer child.Process.Kill()
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "held\n" {
				child.Wait()
				t.Fatalf("the holder: %q", line)
			}
			owner := fmt.Sprintf("child-%d", child.Process.Pid)
			me := Options{Owner: "parent", TTL: holdTTL}
			refused := func(when string) {
				t.Helper()
				l, err := Acquire(ctx, st, "r", me, nil)
				if err == nil {
					l.Release(ctx)
					t.Fatalf("%s: acquired a lease %s holds", when, owner)
				}
				if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "run r: lease: run is held by "+owner+" until ") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("%s: %v; want one line naming %s", when, err, owner)
				}
			}
			refused("while the holder renews")
			time.Sleep(holdTTL + holdTTL/2) // past the first object's expiry: only renewals keep it
			refused("after the holder's first TTL")
			before, err := Latest(ctx, st, "r")
			if err != nil || before.Owner != owner || before.Seq < 5 {
				t.Fatalf("the lease after %s of renewals every %s: %+v, %v", holdTTL+holdTTL/2, holdRenew, before, err)
			}
			child.Process.Signal(syscall.SIGKILL)
			child.Wait()
			last, err := Latest(ctx, st, "r")
			if err != nil {
				t.Fatal(err)
			}
			refused("once the holder is killed, before its lease expires")
			if tc.takeover == "same host" { // the holder's process is gone
				host, _ := os.Hostname()
				l, err := Acquire(ctx, st, "r", Options{Owner: "same-host", Host: host, PID: os.Getpid(), TTL: holdTTL}, nil)
				if err != nil || time.Now().After(last.Expires) {
					t.Fatalf("a process of the dead holder's host, before its expiry: %v", err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				return
			}
			for time.Now().Before(last.Expires) {
				time.Sleep(50 * time.Millisecond)
			}
			l, err := Acquire(ctx, st, "r", me, nil)
			if err != nil {
				t.Fatalf("after the dead holder's lease expired: %v", err)
			}
			if r := l.Record(); r.Owner != "parent" || r.Seq != last.Seq+1 {
				t.Errorf("taken over as %+v, want seq %d", r, last.Seq+1)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l, err = Acquire(ctx, st, "r", Options{Owner: "third", TTL: holdTTL}, nil)
			if err != nil {
				t.Fatalf("after a release: %v", err)
			}
			l.Release(ctx)
		})
	}
}

// TestLost: a holder that stops renewing past its expiry (a paused
// process) finds its run taken over; its next renewal reports ErrLost
// naming the new owner, and it puts nothing more.
func TestLost(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	a, err := Acquire(ctx, st, "r", Options{Owner: "a", TTL: 100 * time.Millisecond, Renew: 400 * time.Millisecond}, func(err error) { lost <- err })
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	b, err := Acquire(ctx, st, "r", Options{Owner: "b", TTL: time.Minute}, nil)
	if err != nil {
		t.Fatalf("b after a's expiry: %v", err)
	}
	err = <-lost
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "taken over by b") || a.Err() == nil {
		t.Fatalf("a's renewal: %v; want ErrLost naming b", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("releasing a lost lease: %v", err)
	}
	if r, _ := Latest(ctx, st, "r"); r.Owner != "b" {
		t.Errorf("the lease after a gave up: %+v, want b's", r)
	}
	b.Release(ctx)
}
