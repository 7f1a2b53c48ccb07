package loop

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/legorl/legorl/storage/lease"
)

// hold takes the run's lease (storage/lease) once the store is open: a
// second `legorl run` of the same run id, on this machine or another,
// stops here with one line naming the holder. The lease is renewed until
// release; if it is lost (this process stalled past its TTL and another
// took the run over), ctx is cancelled with the reason and the loop stops.
func (l *looper) hold(ctx context.Context) error {
	host, _ := os.Hostname()
	pid := os.Getpid()
	var err error
	l.lease, err = lease.Acquire(ctx, l.st, l.cfg.Run, lease.Options{Owner: fmt.Sprintf("%s pid %d", host, pid), Host: host, PID: pid,
		TTL: l.o.LeaseTTL}, func(err error) { l.lost(err) })
	return err
}

// release gives the lease back, so the run can be resumed at once.
func (l *looper) release(ctx context.Context) {
	if l.lease == nil {
		return
	}
	if err := l.lease.Release(context.WithoutCancel(ctx)); err != nil {
		l.logf("%v", err)
	}
}

// lostLease is err, or the lost lease that cancelled ctx.
func lostLease(ctx context.Context, err error) error {
	if c := context.Cause(ctx); err != nil && errors.Is(c, lease.ErrLost) {
		return c
	}
	return err
}
