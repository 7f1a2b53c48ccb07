package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() []Tensor {
	return []Tensor{
		{Name: "a.weight", Shape: []int{2, 3}, Data: []float32{1, -2, 3.5, 0, 1e-3, -7}},
		{Name: "b", Shape: []int{4}, Data: []float32{0.1, 0.2, 0.3, float32(math.Inf(-1))}},
		{Name: "scalar", Shape: []int{}, Data: []float32{42}},
	}
}

func TestRoundTripF32(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := WriteFile(path, sample(), F32, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	s, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Names(), ","); got != "a.weight,b,scalar" {
		t.Fatalf("names %s", got)
	}
	for _, want := range sample() {
		got, err := s.Float32(want.Name, want.Shape)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != want.Data[i] {
				t.Fatalf("%s[%d] = %v, want %v", want.Name, i, got[i], want.Data[i])
			}
		}
	}
}

func TestBF16RoundToNearestEven(t *testing.T) {
	tests := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1.0 exact
		{0x3f808000, 0x3f80}, // halfway, even stays
		{0x3f818000, 0x3f82}, // halfway, odd rounds up to even
		{0x3f808001, 0x3f81}, // above halfway
		{0x3f807fff, 0x3f80}, // below halfway
		{0x7f7fffff, 0x7f80}, // max float rounds to +Inf
		{0xff800000, 0xff80}, // -Inf
	}
	for _, tc := range tests {
		if got := BF16FromFloat32(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("BF16(%#x) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
	if got := BF16FromFloat32(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN -> %#x, not a NaN", got)
	}
	var buf bytes.Buffer
	if err := Write(&buf, sample(), BF16, nil); err != nil {
		t.Fatal(err)
	}
	h, data, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range h.Tensors {
		if info.DType != BF16 {
			t.Fatalf("%s stored as %s", info.Name, info.DType)
		}
		out := make([]float32, Elems(info.Shape))
		if err := ToFloat32(info.DType, data[info.Begin:info.End], out); err != nil {
			t.Fatal(err)
		}
		for _, want := range sample() {
			if want.Name != info.Name {
				continue
			}
			for i, v := range want.Data {
				if d := math.Abs(float64(out[i] - v)); d > math.Abs(float64(v))/128 && !math.IsInf(float64(v), 0) {
					t.Errorf("%s[%d]: bf16 %v far from %v", info.Name, i, out[i], v)
				}
			}
		}
	}
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	ts := sample()
	if err := WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), ts[:1], F32, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), ts[1:], BF16, nil); err != nil {
		t.Fatal(err)
	}
	idx := map[string]any{"weight_map": map[string]string{
		"a.weight": "model-00001-of-00002.safetensors",
		"b":        "model-00002-of-00002.safetensors",
		"scalar":   "model-00002-of-00002.safetensors",
	}}
	b, _ := json.Marshal(idx)
	os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644)
	s, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Float32("scalar", []int{}); err != nil || v[0] != 42 {
		t.Fatalf("scalar = %v, %v", v, err)
	}
	if _, err := s.Float32("a.weight", []int{3, 2}); !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), `"a.weight"`) {
		t.Fatalf("shape mismatch: %v", err)
	}
	if _, err := s.Float32("c", []int{1}); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("missing: %v", err)
	}
	// An index that names a tensor its shard lacks.
	idx["weight_map"].(map[string]string)["ghost"] = "model-00001-of-00002.safetensors"
	b, _ = json.Marshal(idx)
	os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644)
	if _, err := ReadDir(dir); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), `"ghost"`) {
		t.Fatalf("ghost: %v", err)
	}
}

func encode(header string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func TestDecodeErrors(t *testing.T) {
	var good bytes.Buffer
	Write(&good, sample(), F32, nil)
	tests := []struct {
		name  string
		in    []byte
		want  error
		names string // a fragment the message must contain
	}{
		{"short", []byte{1, 2}, ErrTruncated, "at least 8"},
		{"truncated data", good.Bytes()[:good.Len()-3], ErrTruncated, `"scalar"`},
		{"truncated header", good.Bytes()[:20], ErrTruncated, "header needs"},
		{"not json", encode("[1]", nil), ErrHeader, "not a JSON object"},
		{"f16", encode(`{"x":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, []byte{0, 0}), ErrDType, `"x"`},
		{"wrong span", encode(`{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrHeader, `"x"`},
		{"gap", encode(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), ErrHeader, `"x" starts at byte 4`},
		{"negative dim", encode(`{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, nil), ErrHeader, `"x"`},
		{"huge header", encode("", nil)[:0], ErrTruncated, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode(tc.in)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.names) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want %v containing %q", err, tc.want, tc.names)
			}
		})
	}
}

func FuzzParseHeader(f *testing.F) {
	var good bytes.Buffer
	Write(&good, sample(), BF16, map[string]string{"format": "pt"})
	f.Add(good.Bytes())
	f.Add(encode(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(encode(`{"x":{"dtype":"F32","shape":[9223372036854775807,4],"data_offsets":[0,4]}}`, nil))
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := Decode(b)
		if err != nil {
			return
		}
		for _, info := range h.Tensors {
			out := make([]float32, Elems(info.Shape))
			if err := ToFloat32(info.DType, data[info.Begin:info.End], out); err != nil {
				t.Fatalf("header accepted but tensor %q does not decode: %v", info.Name, err)
			}
		}
	})
}
