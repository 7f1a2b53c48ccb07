package s3test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/legorl/legorl/storage"
)

func TestMain(m *testing.M) { Main(m) }

// TestServerHonoursIfNoneMatch proves the property the commit protocol
// relies on: a second put of an existing key gets 412, not an overwrite.
func TestServerHonoursIfNoneMatch(t *testing.T) {
	st := Store(t)
	ctx := context.Background()
	if err := st.ProbeWriteOnce(ctx, "probe/write-once"); err != nil {
		t.Fatalf("server does not honour If-None-Match: %v", err)
	}
	err := st.Put(ctx, "probe/write-once", strings.NewReader("other"), 5)
	if !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second put: got %v, want ErrExists", err)
	}
	rc, err := st.Get(ctx, "probe/write-once")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "probe" {
		t.Fatalf("object was overwritten: %q", b)
	}
}
