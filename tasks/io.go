package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// UnmarshalJSON reads a JSON list of strings, or a string holding one (the
// SWE-bench datasets store FAIL_TO_PASS that way).
func (l *TestList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" {
			*l = nil
			return nil
		}
		b = []byte(s)
	}
	var xs []string
	if err := json.Unmarshal(b, &xs); err != nil {
		return fmt.Errorf("test list: %w", err)
	}
	*l = xs
	return nil
}

// Suite is a list of instances and the folder their relative snapshot
// paths are relative to.
type Suite struct {
	Dir       string
	Instances []Instance
}

// Find returns the instance with the id.
func (s *Suite) Find(id string) (*Instance, bool) {
	for i := range s.Instances {
		if s.Instances[i].InstanceID == id {
			return &s.Instances[i], true
		}
	}
	return nil, false
}

// Runnable counts the instances a pipeline rolls out for splits: those
// that pass Check and are in one of splits, or in none (an instance
// without a split always runs).
func Runnable(ins []Instance, splits []string) int {
	n := 0
	for i := range ins {
		in := &ins[i]
		if in.Check() == nil && (in.Split == "" || slices.Contains(splits, in.Split)) {
			n++
		}
	}
	return n
}

// MaxLineBytes bounds one JSONL line. Defaults to 64 MiB.
const MaxLineBytes = 64 << 20

// ReadJSONL reads instances, one JSON object per line; blank lines are
// skipped. A line that does not decode is an error naming its number.
func ReadJSONL(r io.Reader) ([]Instance, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	var out []Instance
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var in Instance
		if err := json.Unmarshal(b, &in); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrInvalid, line, err)
		}
		out = append(out, in)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tasks: read line %d: %w", line+1, err)
	}
	return out, nil
}

// WriteJSONL writes instances, one JSON object per line, with SWE-bench's
// field names (FAIL_TO_PASS and PASS_TO_PASS as JSON lists).
func WriteJSONL(w io.Writer, ins []Instance) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range ins {
		if err := enc.Encode(&ins[i]); err != nil {
			return fmt.Errorf("tasks: write %s: %w", ins[i].InstanceID, err)
		}
	}
	return nil
}

// ReadParquet reads instances from a Parquet file with the columns of
// Instance (SWE-bench names).
func ReadParquet(r io.ReaderAt, size int64) (out []Instance, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("%w: parquet: %v", ErrInvalid, p)
		}
	}()
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: parquet: %v", ErrInvalid, err)
	}
	pr := parquet.NewGenericReader[Instance](f)
	defer pr.Close()
	out = make([]Instance, 0, pr.NumRows())
	buf := make([]Instance, 64)
	for {
		n, err := pr.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: parquet: %v", ErrInvalid, err)
		}
	}
}

// WriteParquet writes instances as one Parquet file (zstd).
func WriteParquet(w io.Writer, ins []Instance) error {
	pw := parquet.NewGenericWriter[Instance](w, parquet.Compression(&parquet.Zstd))
	if _, err := pw.Write(ins); err != nil {
		return fmt.Errorf("tasks: write parquet: %w", err)
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("tasks: write parquet: %w", err)
	}
	return nil
}

// Load reads a suite file: .jsonl / .json (JSON lines) or .parquet, or a
// folder holding tasks.jsonl. Instances are not validated; see Check.
func Load(path string) (*Suite, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	if st.IsDir() {
		path = filepath.Join(path, "tasks.jsonl")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	defer f.Close()
	var ins []Instance
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("tasks: %w", err)
		}
		ins, err = ReadParquet(f, fi.Size())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	case ".jsonl", ".json", ".ndjson":
		ins, err = ReadJSONL(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("tasks: %s: unknown suite format (want .jsonl or .parquet)", path)
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	return &Suite{Dir: abs, Instances: ins}, nil
}
