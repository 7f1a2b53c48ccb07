package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// ErrRelay is returned by StartRelay when it cannot relay.
var ErrRelay = errors.New("runner: relay")

// StartRelay listens on 127.0.0.1 at the port of target (HOST:PORT) and
// copies each connection to target and back, until stop. Prism names its
// endpoints localhost:PORT (its job service, Fn API, artifact staging and
// provision service share one port), and a launcher or worker on another
// machine dials them as given: the relay makes localhost:PORT there reach
// the job server. The port must be free on this machine.
func StartRelay(ctx context.Context, target string) (stop func(), err error) {
	_, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("%w: job server %q: want HOST:PORT", ErrRelay, target)
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, fmt.Errorf("%w: localhost:%s for the job server at %s: %w", ErrRelay, port, target, err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				relayConn(rctx, c, target)
			}()
		}
	}()
	return func() {
		cancel()
		lis.Close()
		wg.Wait()
	}, nil
}

// relayConn copies c to a new connection to target and back until either
// side closes or ctx ends.
func relayConn(ctx context.Context, c net.Conn, target string) {
	defer c.Close()
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(up, c)
	go copyHalf(c, up)
	select {
	case <-ctx.Done():
	case <-done:
		<-done
	}
}
