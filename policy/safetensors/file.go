package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// Tensor is a named float32 tensor to write.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// Write writes tensors in the given order as one safetensors stream, each
// stored as dtype (F32 or BF16), with the given header metadata.
func Write(w io.Writer, tensors []Tensor, dtype DType, metadata map[string]string) error {
	if dtype.Size() == 0 {
		return fmt.Errorf("%w: cannot write %q", ErrDType, dtype)
	}
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	seen := map[string]bool{}
	for _, t := range tensors {
		if t.Name == "" || t.Name == "__metadata__" || seen[t.Name] {
			return fmt.Errorf("%w: tensor name %q is empty, reserved or repeated", ErrHeader, t.Name)
		}
		seen[t.Name] = true
		if Elems(t.Shape) != int64(len(t.Data)) {
			return fmt.Errorf("%w: tensor %q has %d values for shape %v", ErrShape, t.Name, len(t.Data), t.Shape)
		}
		n := int64(len(t.Data) * dtype.Size())
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = map[string]any{"dtype": dtype, "shape": shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: encode header: %w", err)
	}
	for len(hb)%8 != 0 { // align the data section, as the reference writer does
		hb = append(hb, ' ')
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var n8 [8]byte
	binary.LittleEndian.PutUint64(n8[:], uint64(len(hb)))
	bw.Write(n8[:])
	bw.Write(hb)
	var buf [4]byte
	for _, t := range tensors {
		for _, v := range t.Data {
			if dtype == F32 {
				binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
				bw.Write(buf[:4])
			} else {
				binary.LittleEndian.PutUint16(buf[:], BF16FromFloat32(v))
				bw.Write(buf[:2])
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// WriteFile writes tensors to path (see Write), through a temporary file
// renamed into place so a reader never sees a partial file.
func WriteFile(path string, tensors []Tensor, dtype DType, metadata map[string]string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".safetensors-*")
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer os.Remove(f.Name())
	if err := Write(f, tensors, dtype, metadata); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("safetensors: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// Set is a read-only collection of tensors from one file or from the shards
// of a sharded checkpoint.
type Set struct {
	tensors  map[string]entry
	metadata map[string]string
}

// Metadata returns the __metadata__ of the file (of the first shard that
// has one, for a sharded checkpoint).
func (s *Set) Metadata() map[string]string { return s.metadata }

type entry struct {
	info Info
	data []byte // the tensor's bytes
	file string
}

// Names returns the tensor names, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.tensors))
	for n := range s.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Info returns the description of a tensor.
func (s *Set) Info(name string) (Info, bool) {
	e, ok := s.tensors[name]
	return e.info, ok
}

// Float32 returns the named tensor as float32, checking that its shape is
// want.
func (s *Set) Float32(name string, want []int) ([]float32, error) {
	e, ok := s.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrMissing, name)
	}
	if !slices.Equal(e.info.Shape, want) {
		return nil, fmt.Errorf("%w: tensor %q has shape %v in %s, want %v", ErrShape, name, e.info.Shape, filepath.Base(e.file), want)
	}
	out := make([]float32, Elems(want))
	if err := ToFloat32(e.info.DType, e.data, out); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	return out, nil
}

// ReadFile reads one safetensors file.
func ReadFile(path string) (*Set, error) {
	s := &Set{tensors: map[string]entry{}}
	if err := s.add(path, nil); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Set) add(path string, only map[string]bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	h, data, err := Decode(b)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	if s.metadata == nil && len(h.Metadata) > 0 {
		s.metadata = h.Metadata
	}
	for _, t := range h.Tensors {
		if only != nil && !only[t.Name] {
			continue
		}
		if prev, dup := s.tensors[t.Name]; dup {
			return fmt.Errorf("%w: tensor %q is in both %s and %s", ErrHeader, t.Name, filepath.Base(prev.file), filepath.Base(path))
		}
		s.tensors[t.Name] = entry{info: t, data: data[t.Begin:t.End], file: path}
	}
	return nil
}

// IndexFile is the name of a sharded checkpoint's index.
const IndexFile = "model.safetensors.index.json"

// SingleFile is the name of an unsharded checkpoint's tensor file.
const SingleFile = "model.safetensors"

// ReadDir reads the tensors of a Hugging Face checkpoint folder: the shards
// listed in model.safetensors.index.json when it exists, else
// model.safetensors. Every tensor the index lists must be in its shard.
func ReadDir(dir string) (*Set, error) {
	ib, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if os.IsNotExist(err) {
		return ReadFile(filepath.Join(dir, SingleFile))
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(ib, &idx); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrHeader, IndexFile, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%w: %s has no weight_map", ErrHeader, IndexFile)
	}
	shards := map[string]map[string]bool{}
	for name, file := range idx.WeightMap {
		if file == "" || filepath.Base(file) != file {
			return nil, fmt.Errorf("%w: %s maps tensor %q to file %q", ErrHeader, IndexFile, name, file)
		}
		if shards[file] == nil {
			shards[file] = map[string]bool{}
		}
		shards[file][name] = true
	}
	files := make([]string, 0, len(shards))
	for f := range shards {
		files = append(files, f)
	}
	sort.Strings(files)
	s := &Set{tensors: map[string]entry{}}
	for _, f := range files {
		if err := s.add(filepath.Join(dir, f), shards[f]); err != nil {
			return nil, err
		}
	}
	for name, file := range idx.WeightMap {
		if _, ok := s.tensors[name]; !ok {
			return nil, fmt.Errorf("%w: %q (the index puts it in %s)", ErrMissing, name, file)
		}
	}
	return s, nil
}
