package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestPTXMatchesSource fails when kernels.cu changed after kernels.ptx was
// generated: the PTX records the source's sha256 (`make ptx` rewrites both).
func TestPTXMatchesSource(t *testing.T) {
	src, err := os.ReadFile("kernels.cu")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	got := hex.EncodeToString(sum[:])
	want, err := SourceSHA256()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("kernels.cu has sha256 %s but kernels.ptx was generated from %s: run make ptx", got, want)
	}
}

// TestEntries checks that every kernel the Go side launches is an entry of
// the PTX with Params[name] parameters of 8 bytes each (the launch copies
// 8 bytes per argument), and that the PTX has no kernel the Go side does
// not know.
func TestEntries(t *testing.T) {
	entries := Entries()
	names := Names()
	if len(names) != len(Params) {
		t.Fatalf("Names has %d kernels, Params %d", len(names), len(Params))
	}
	for _, name := range names {
		types, ok := entries[name]
		if !ok {
			t.Errorf("kernel %s: no .entry in kernels.ptx", name)
			continue
		}
		if want := Params[name]; len(types) != want {
			t.Errorf("kernel %s: %d parameters in the PTX, Params says %d", name, len(types), want)
		}
		for i, ty := range types {
			switch ty {
			case ".u64", ".s64", ".b64", ".f64":
			default:
				t.Errorf("kernel %s: parameter %d is %s, not 8 bytes", name, i, ty)
			}
		}
	}
	for name := range entries {
		if _, ok := Params[name]; !ok {
			t.Errorf("kernels.ptx defines %s, unknown to the Go side", name)
		}
	}
}

// TestSharedMemory checks the static shared memory of the PTX, all kernels
// together (an upper bound of any one's), against the 48 KiB a block may
// use without opting in.
func TestSharedMemory(t *testing.T) {
	n := 0
	for _, m := range shared.FindAllStringSubmatch(PTX, -1) {
		b, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		n += b
	}
	if n == 0 || n > 48<<10 {
		t.Fatalf("kernels.ptx declares %d bytes of static shared memory, want (0, 48 KiB]", n)
	}
}

var shared = regexp.MustCompile(`\.shared \.align \d+ \.b8 \w+\[(\d+)\];`)
