// Package safetensors reads and writes the Hugging Face safetensors format:
// an 8-byte little-endian header length, a JSON header mapping tensor names
// to dtype, shape and byte offsets, then the raw little-endian tensor data.
//
// Only what the policy model needs is supported: F32 and BF16 tensors (BF16
// is widened to float32 on read and narrowed with round-to-nearest-even on
// write), single files and the sharded layout of model.safetensors.index.json.
// Every malformed input is a one-line error wrapping a sentinel of this
// package and naming the tensor or header field at fault; nothing panics.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// Sentinel errors; every error of this package wraps one of them.
var (
	ErrHeader    = errors.New("safetensors: bad header")
	ErrDType     = errors.New("safetensors: unsupported dtype")
	ErrTruncated = errors.New("safetensors: truncated file")
	ErrMissing   = errors.New("safetensors: missing tensor")
	ErrShape     = errors.New("safetensors: shape mismatch")
)

// DType is a tensor element type as spelled in the header.
type DType string

// The element types this package reads and writes.
const (
	F32  DType = "F32"
	BF16 DType = "BF16"
)

// Size returns the bytes per element of d, or 0 for an unsupported dtype.
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case BF16:
		return 2
	}
	return 0
}

// MaxHeaderBytes bounds the JSON header, as the reference implementation does.
const MaxHeaderBytes = 100 << 20

// Info describes one tensor of a file.
type Info struct {
	Name  string
	DType DType
	Shape []int
	Begin int64 // byte offset in the data section
	End   int64
}

// Elems returns the number of elements of shape (1 for a scalar).
func Elems(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// Header is a parsed safetensors header.
type Header struct {
	Tensors  []Info // sorted by Begin
	Metadata map[string]string
	DataLen  int64 // bytes the data section must hold
}

type rawInfo struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// ParseHeader parses the JSON header of a safetensors file (the bytes after
// the 8-byte length). It checks every tensor's dtype, shape and offsets: the
// offsets must tile the data section without gaps or overlaps and each span
// must hold exactly the bytes its shape and dtype need.
func ParseHeader(b []byte) (*Header, error) {
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: header is not a JSON object", ErrHeader)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHeader, err)
	}
	h := &Header{Metadata: map[string]string{}}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &h.Metadata); err != nil {
				return nil, fmt.Errorf("%w: __metadata__ must map strings to strings: %v", ErrHeader, err)
			}
			continue
		}
		var ri rawInfo
		if err := json.Unmarshal(msg, &ri); err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %v", ErrHeader, name, err)
		}
		d := DType(ri.DType)
		if d.Size() == 0 {
			return nil, fmt.Errorf("%w: tensor %q has dtype %q (want F32 or BF16)", ErrDType, name, ri.DType)
		}
		if len(ri.Offsets) != 2 || ri.Offsets[0] < 0 || ri.Offsets[1] < ri.Offsets[0] {
			return nil, fmt.Errorf("%w: tensor %q has data_offsets %v", ErrHeader, name, ri.Offsets)
		}
		shape := make([]int, len(ri.Shape))
		n := int64(1)
		for i, s := range ri.Shape {
			if s < 0 || s > math.MaxInt32 || (s > 0 && n > math.MaxInt64/8/s) {
				return nil, fmt.Errorf("%w: tensor %q has shape %v", ErrHeader, name, ri.Shape)
			}
			shape[i] = int(s)
			n *= s
		}
		if want := n * int64(d.Size()); ri.Offsets[1]-ri.Offsets[0] != want {
			return nil, fmt.Errorf("%w: tensor %q spans %d bytes, its %s shape %v needs %d",
				ErrHeader, name, ri.Offsets[1]-ri.Offsets[0], d, ri.Shape, want)
		}
		h.Tensors = append(h.Tensors, Info{Name: name, DType: d, Shape: shape, Begin: ri.Offsets[0], End: ri.Offsets[1]})
	}
	sort.Slice(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	var pos int64
	for _, t := range h.Tensors {
		if t.Begin != pos {
			return nil, fmt.Errorf("%w: tensor %q starts at byte %d, want %d (gap or overlap)", ErrHeader, t.Name, t.Begin, pos)
		}
		pos = t.End
	}
	h.DataLen = pos
	return h, nil
}

// Decode parses a whole safetensors file held in memory and returns its
// header and data section. It fails with ErrTruncated when the data section
// is shorter than the header says.
func Decode(b []byte) (*Header, []byte, error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("%w: %d bytes, want at least 8", ErrTruncated, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxHeaderBytes {
		return nil, nil, fmt.Errorf("%w: header length %d exceeds %d", ErrHeader, n, MaxHeaderBytes)
	}
	if uint64(len(b)-8) < n {
		return nil, nil, fmt.Errorf("%w: header needs %d bytes, file has %d", ErrTruncated, n, len(b)-8)
	}
	h, err := ParseHeader(b[8 : 8+n])
	if err != nil {
		return nil, nil, err
	}
	data := b[8+n:]
	if int64(len(data)) < h.DataLen {
		last := ""
		for _, t := range h.Tensors {
			if t.End > int64(len(data)) {
				last = t.Name
				break
			}
		}
		return nil, nil, fmt.Errorf("%w: tensor %q needs data up to byte %d, file has %d", ErrTruncated, last, h.DataLen, len(data))
	}
	return h, data[:h.DataLen], nil
}

// ToFloat32 converts one tensor's raw little-endian bytes to float32.
func ToFloat32(d DType, raw []byte, out []float32) error {
	if d.Size() == 0 {
		return fmt.Errorf("%w: %q", ErrDType, d)
	}
	if len(raw) != len(out)*d.Size() {
		return fmt.Errorf("%w: %d bytes for %d %s elements", ErrShape, len(raw), len(out), d)
	}
	switch d {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	}
	return nil
}

// BF16FromFloat32 narrows f to bfloat16 bits with round-to-nearest-even;
// NaN stays NaN (quiet).
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
