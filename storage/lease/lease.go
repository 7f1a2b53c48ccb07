// Package lease keeps one writer per run: a lease is a chain of write-once
// objects under runs/RUN/lease/ (NNNNNN.json, numbered from 1), each naming
// an owner and an expiry. The newest object is the lease. A writer
// acquires it by putting the next number while the newest has expired (or
// none exists), renews it by putting the next number again before it
// expires, and releases it by putting one that expires at once. Two
// writers racing for the same number: the store's write-once put lets one
// win; the other reads the winner and reports it. So a second writer of a
// run is refused, naming the holder, and a holder that died is taken over
// once its lease expires, on any store with write-once puts (file:// and
// S3 alike).
//
// A holder on the same host whose process is gone (killed, crashed) is
// taken over at once, without waiting for the expiry: a run killed and
// started again on one machine resumes at once.
//
// Expiry times are the holder's clock: machines sharing a run must keep
// their clocks within a small part of the TTL of each other.
package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

// Sentinel errors.
var (
	// ErrHeld: another owner holds the run's lease and it has not expired.
	ErrHeld = errors.New("lease: run is held")
	// ErrLost: a renewal found the lease taken by another owner (this
	// holder stopped renewing past its expiry).
	ErrLost = errors.New("lease: lost")
)

// Record is one lease object.
type Record struct {
	Run     string    `json:"run"`
	Owner   string    `json:"owner"`
	Host    string    `json:"host,omitempty"`
	PID     int       `json:"pid,omitempty"`
	Expires time.Time `json:"expires"`
	// Seq is the object's number in the chain.
	Seq int `json:"seq"`
}

// Prefix is where run's lease objects live.
func Prefix(run string) string { return schemas.RunPrefix(run) + "lease/" }

func key(run string, seq int) string { return fmt.Sprintf("%s%06d.json", Prefix(run), seq) }

// Options configure Acquire.
type Options struct {
	// Owner names the holder in messages (host, process id, a random
	// part). Required.
	Owner string
	// Host and PID identify the holder's process, so that another process
	// on the same host can take over the lease of one that is gone at
	// once. Defaults to none: the lease is only taken over at its expiry.
	Host string
	PID  int
	// TTL is how long a lease lasts without renewal: a dead holder's run
	// can be taken over TTL after its last renewal. Defaults to 2 minutes.
	TTL time.Duration
	// Renew is the period of renewal. Defaults to TTL/4.
	Renew time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = 2 * time.Minute
	}
	if o.Renew <= 0 {
		o.Renew = o.TTL / 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Latest returns the newest lease object of run, or nil when it has none.
func Latest(ctx context.Context, st storage.Store, run string) (*Record, error) {
	keys, err := st.List(ctx, Prefix(run))
	if err != nil {
		return nil, err
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if _, err := seqOf(keys[i]); err != nil {
			continue // not a lease object
		}
		return read(ctx, st, keys[i])
	}
	return nil, nil
}

func seqOf(key string) (int, error) {
	name, ok := strings.CutSuffix(path.Base(key), ".json")
	if !ok || len(name) != 6 {
		return 0, fmt.Errorf("not a lease key: %s", key)
	}
	return strconv.Atoi(name)
}

func read(ctx context.Context, st storage.Getter, key string) (*Record, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("lease: read %s: %w", key, err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("lease: %s: %w", key, err)
	}
	if seq, err := seqOf(key); err != nil || seq != r.Seq {
		return nil, fmt.Errorf("lease: %s holds seq %d", key, r.Seq)
	}
	return &r, nil
}

// put writes r as the lease object r.Seq; storage.ErrExists when another
// writer put that number first.
func put(ctx context.Context, st storage.Putter, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return st.Put(ctx, key(r.Run, r.Seq), bytes.NewReader(b), int64(len(b)))
}

// heldError is ErrHeld naming the holder.
func heldError(r *Record, now time.Time) error {
	return fmt.Errorf("%w by %s until %s (%s from now; lease %s): another legorl run is writing it; wait for it, or use another run id",
		ErrHeld, r.Owner, r.Expires.UTC().Format(time.RFC3339), r.Expires.Sub(now).Round(time.Second), key(r.Run, r.Seq))
}

// Lease is a held lease, renewed in the background until Release.
type Lease struct {
	st   storage.Store
	o    Options
	stop context.CancelFunc
	done chan struct{}

	mu   sync.Mutex
	rec  Record
	lost error
}

// Acquire takes run's lease for o.Owner: it puts the next lease object when
// the run has none or the newest has expired, and returns ErrHeld naming
// the holder otherwise. The lease is renewed every o.Renew until Release;
// ctx, when cancelled, stops the renewal too. onLost, if not nil, is called
// once if a renewal finds the lease taken or cannot renew it before it
// expires: the holder must then stop writing.
func Acquire(ctx context.Context, st storage.Store, run string, o Options, onLost func(error)) (*Lease, error) {
	o = o.withDefaults()
	if o.Owner == "" {
		return nil, errors.New("lease: no owner")
	}
	for {
		cur, err := Latest(ctx, st, run)
		if err != nil {
			return nil, fmt.Errorf("lease: run %s: %w", run, err)
		}
		now := o.Now()
		next := Record{Run: run, Owner: o.Owner, Host: o.Host, PID: o.PID, Expires: now.Add(o.TTL), Seq: 1}
		if cur != nil {
			if now.Before(cur.Expires) && !gone(cur, o.Host) {
				return nil, fmt.Errorf("run %s: %w", run, heldError(cur, now))
			}
			next.Seq = cur.Seq + 1
		}
		err = put(ctx, st, next)
		if errors.Is(err, storage.ErrExists) {
			continue // another writer took this number: read it
		}
		if err != nil {
			return nil, fmt.Errorf("lease: run %s: %w", run, err)
		}
		rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		l := &Lease{st: st, o: o, stop: stop, done: make(chan struct{}), rec: next}
		go l.renew(rctx, ctx.Done(), onLost)
		return l, nil
	}
}

// Record returns the lease object put last.
func (l *Lease) Record() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

// renew puts the next lease object every o.Renew, until stopped. A renewal
// that meets another owner's object, or that keeps failing until the lease
// expires, calls onLost and ends.
func (l *Lease) renew(ctx context.Context, parent <-chan struct{}, onLost func(error)) {
	defer close(l.done)
	t := time.NewTicker(l.o.Renew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-parent:
			return
		case <-t.C:
		}
		cur := l.Record()
		next := cur
		next.Expires, next.Seq = l.o.Now().Add(l.o.TTL), cur.Seq+1
		err := put(ctx, l.st, next)
		if err == nil {
			l.mu.Lock()
			l.rec = next
			l.mu.Unlock()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, storage.ErrExists) {
			err = fmt.Errorf("%w: run %s: lease %s was put by another owner after ours expired", ErrLost, cur.Run, key(cur.Run, next.Seq))
			if r, rerr := read(ctx, l.st, key(cur.Run, next.Seq)); rerr == nil && r.Owner != cur.Owner {
				err = fmt.Errorf("%w: run %s: taken over by %s (lease %s) after ours expired", ErrLost, cur.Run, r.Owner, key(cur.Run, next.Seq))
			}
		} else if l.o.Now().Before(cur.Expires) {
			continue // a failed renewal: try again while the lease holds
		} else {
			err = fmt.Errorf("%w: run %s: not renewed before it expired: %w", ErrLost, cur.Run, err)
		}
		l.mu.Lock()
		l.lost = err
		l.mu.Unlock()
		if onLost != nil {
			onLost(err)
		}
		return
	}
}

// Err returns why the lease was lost, or nil while it holds.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Release stops the renewal and, unless the lease was lost, puts a lease
// object that expires at once, so the next writer of the run need not wait
// for the TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.stop()
	<-l.done
	if l.Err() != nil {
		return nil
	}
	cur := l.Record()
	next := cur
	next.Expires, next.Seq = l.o.Now(), cur.Seq+1
	if err := put(ctx, l.st, next); err != nil {
		return fmt.Errorf("lease: release run %s: %w", cur.Run, err)
	}
	l.mu.Lock()
	l.rec = next
	l.mu.Unlock()
	return nil
}

// gone reports whether r's holder is a process of host that no longer
// exists (signal 0 answers ESRCH).
func gone(r *Record, host string) bool {
	if host == "" || r.Host != host || r.PID <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(r.PID, 0), syscall.ESRCH)
}
