//go:build linux

package initproc

import (
	"errors"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// messages are one of each kind the protocol sends.
var messages = Samples()

// TestEncode: every message decodes to itself, and every strict prefix of
// its encoding, or the encoding with a byte more, is malformed.
func TestEncode(t *testing.T) {
	for _, tt := range messages {
		t.Run(tt.Name, func(t *testing.T) {
			b := tt.Message.encode()
			got, err := decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.Message) {
				t.Fatalf("decoded %+v, want %+v", *got, tt.Message)
			}
			for i := range b {
				if _, err := decode(b[:i]); !errors.Is(err, errMalformed) {
					t.Fatalf("%d of %d bytes: error %v, want errMalformed", i, len(b), err)
				}
			}
			if _, err := decode(append(b, 0)); !errors.Is(err, errMalformed) {
				t.Fatalf("a byte more: error %v, want errMalformed", err)
			}
		})
	}
}

// TestSendRecv: a message and its descriptors cross a socket pair.
func TestSendRecv(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseAll(pair[:])
	for _, tt := range messages {
		t.Run(tt.Name, func(t *testing.T) {
			if err := Send(pair[0], &tt.Message, pair[0]); err != nil {
				t.Fatal(err)
			}
			got, fds, err := Recv(pair[1])
			if err != nil {
				t.Fatal(err)
			}
			CloseAll(fds)
			if !reflect.DeepEqual(*got, tt.Message) || len(fds) != 1 {
				t.Fatalf("received %+v with %d descriptors, want %+v with 1", *got, len(fds), tt.Message)
			}
		})
	}
}

// FuzzDecode: decode never panics, and what it accepts encodes back to the
// same bytes.
func FuzzDecode(f *testing.F) {
	for _, tt := range messages {
		f.Add(tt.Message.encode())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(b)
		if err != nil {
			return
		}
		if again := m.encode(); string(again) != string(b) {
			t.Fatalf("decode(%x) = %+v, which encodes to %x", b, m, again)
		}
	})
}
