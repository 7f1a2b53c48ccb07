package runner

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"golang.org/x/sys/unix"
)

// Prism's job service (which also serves the Fn API to the workers) listens
// on ":0", every interface, and has no option to change it (Beam v2.77:
// jobservices.NewServer). Anyone who reaches the machine could submit a
// job to it, and a job can ask for PROCESS or DOCKER workers: code
// execution. So startPrism finds the new listening socket in this process
// and binds it to the loopback device (SO_BINDTODEVICE "lo"): connections
// that arrive on any other interface no longer match it (the kernel answers
// them with a reset), while the launcher and the loopback workers reach it
// at localhost as before. Known limit: the socket listens for the short
// time between its creation and the bind (about a millisecond, on a random
// port) before the restriction applies.

var prismOnce struct {
	sync.Mutex
	endpoint string
}

// startPrism starts the in-process Prism job service once per process,
// bound to the loopback device, and returns its endpoint.
func startPrism(ctx context.Context) (string, error) {
	prismOnce.Lock()
	defer prismOnce.Unlock()
	if prismOnce.endpoint != "" {
		return prismOnce.endpoint, nil
	}
	ep, err := startPrismOn(ctx, 0, "lo")
	if err != nil {
		return "", err
	}
	prismOnce.endpoint = ep
	return ep, nil
}

// listenMu keeps two starts from seeing each other's listener.
var listenMu sync.Mutex

// startPrismOn starts a Prism job service on port (0: any), bound to
// device ("lo": loopback; "": none, every interface), and returns its
// endpoint at localhost.
func startPrismOn(ctx context.Context, port int, device string) (string, error) {
	listenMu.Lock()
	defer listenMu.Unlock()
	before, err := tcpListeners()
	if err != nil {
		return "", fmt.Errorf("runner: prism: %w", err)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := prism.CreateJobServer(dctx, prism.Options{Port: port}); err != nil {
		return "", fmt.Errorf("runner: prism: %w", err)
	}
	after, err := tcpListeners()
	if err != nil {
		return "", fmt.Errorf("runner: prism: %w", err)
	}
	found := 0
	for ino, l := range after {
		if _, old := before[ino]; old || !l.wildcard {
			continue
		}
		if device != "" {
			if err := unix.SetsockoptString(l.fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, device); err != nil {
				return "", fmt.Errorf("runner: prism: bind the job service to %s: %w", device, err)
			}
			if dev, err := unix.GetsockoptString(l.fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE); err != nil || dev != device {
				return "", fmt.Errorf("runner: prism: the job service is bound to %q, not %s (%v)", dev, device, err)
			}
		}
		if found != 0 {
			return "", fmt.Errorf("runner: prism: more than one new listener (ports %d and %d)", found, l.port)
		}
		found = l.port
	}
	if found == 0 {
		return "", fmt.Errorf("runner: prism: its job service's listener was not found")
	}
	return "localhost:" + strconv.Itoa(found), nil
}

// PrismEndpoint returns the endpoint of this process's Prism, starting it
// if needed (tests check its binding).
func PrismEndpoint(ctx context.Context) (string, error) { return startPrism(ctx) }

type listener struct {
	fd       int
	port     int
	wildcard bool
}

// tcpListeners returns this process's listening TCP sockets by inode.
func tcpListeners() (map[string]listener, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	out := map[string]listener{}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || on != 1 {
			continue
		}
		// Go listens with MPTCP where the kernel has it (its subflows are TCP).
		if proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || (proto != unix.IPPROTO_TCP && proto != unix.IPPROTO_MPTCP) {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		switch a := sa.(type) {
		case *unix.SockaddrInet4:
			out[target] = listener{fd: fd, port: a.Port, wildcard: a.Addr == [4]byte{}}
		case *unix.SockaddrInet6:
			out[target] = listener{fd: fd, port: a.Port, wildcard: a.Addr == [16]byte{}}
		}
	}
	return out, nil
}
