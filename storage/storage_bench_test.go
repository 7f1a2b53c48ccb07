package storage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	pgo "github.com/parquet-go/parquet-go"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/s3test"
)

// Benchmarks of the segments table, the bulk of every run's data. One file
// holds the segments of 96 rollouts of an MoE policy: a 2048-token prompt,
// 8 turns of 256 sampled and 256 observation tokens, 4 MoE layers x top-8
// routing, about 40 MB of logical payload. b.SetBytes is that payload (token
// ids, loss mask, logprobs and expert ids at their in-memory widths), so
// MB/s is payload per second, comparable across encoders.
//
// Sub-benchmarks:
//
//	file, s3         the storage API: WriteFile / OpenFile+Batches on a
//	                 FileStore or on versitygw through S3Store (sha256,
//	                 temporary file, write-once put included)
//	parquet-go-bare  the same parquet-go encoding (or pqarrow decoding of
//	                 the same file) on a plain local file: no store, no sha256
//	arrow-go-anchor  arrow-go's pqarrow writer (zstd, otherwise its defaults)
//	                 on a plain local file, from the same rows; reads decode
//	                 that file. The yardstick for the numbers above.
//
// Each reports file-MB (on-disk size) and ratio (payload / on-disk size).
// Reads of a local file also report peak-RSS-MB and RSS/payload: the peak
// resident set size (VmHWM, Linux only) of a child process, this test binary
// re-run as TestReadChild, that reads the file once as the timed loop does
// (the highest of three such children); idle-RSS-MB is the same child doing
// nothing, the floor.

// benchSegmentsConfig sizes the benchmark file.
var benchSegmentsConfig = synth.Config{
	RunID: "bench", Seed: 1, Iterations: 1, Tasks: 12, GroupSize: 8,
	PromptTokens: 2048, Turns: 8, TurnTokens: 256, ObsTokens: 256,
	MoELayers: 4, TopK: 8,
}

var benchSegments = sync.OnceValues(func() ([]schemas.Segment, int64) {
	segs := synth.Run(benchSegmentsConfig)[0].Segments
	return segs, segmentsPayload(segs)
})

// segmentsPayload returns the bytes of the token-level values of segs.
func segmentsPayload(segs []schemas.Segment) int64 {
	var n int64
	for _, s := range segs {
		n += 4*int64(len(s.PromptTokenIDs)+len(s.CompletionTokenIDs)) +
			int64(len(s.LossMask)) + 4*int64(len(s.Logprobs)) + 2*int64(len(s.RoutingExperts))
	}
	return n
}

var benchFooter = schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableSegments, RunID: "bench", PolicyVersion: 1, CodeVersion: "bench"}

func benchKey(i int) string {
	return fmt.Sprintf("runs/bench/data/segments/iter-000000/rollout-shard-%d.parquet", i)
}

func BenchmarkWriteSegments(b *testing.B) {
	segs, payload := benchSegments()
	b.Run("file", func(b *testing.B) {
		benchStoreWrite(b, benchFileStore(b), segs, payload)
	})
	b.Run("s3", func(b *testing.B) {
		benchStoreWrite(b, s3test.Store(b), segs, payload)
	})
	b.Run("parquet-go-bare", func(b *testing.B) {
		benchBareWrite(b, segs, payload)
	})
	b.Run("arrow-go-anchor", func(b *testing.B) {
		dir := b.TempDir()
		b.SetBytes(payload)
		var size int64
		i := 0
		cpu := startCPU()
		for b.Loop() {
			var err error
			if size, err = writeArrowGo(filepath.Join(dir, fmt.Sprintf("%d.parquet", i)), segs); err != nil {
				b.Fatal(err)
			}
			i++
		}
		cpu.report(b, i, payload)
		reportSize(b, payload, size)
		reportColumns(b, filepath.Join(dir, "0.parquet"))
	})
}

// segmentNoSplit is schemas.Segment with logprobs in PLAIN encoding instead
// of BYTE_STREAM_SPLIT: the alternative the split tag is measured against.
type segmentNoSplit struct {
	RunID              string    `parquet:"run_id"`
	Iteration          int32     `parquet:"iteration"`
	RolloutID          string    `parquet:"rollout_id"`
	SegmentIndex       int32     `parquet:"segment_index"`
	FirstCall          int32     `parquet:"first_call"`
	LastCall           int32     `parquet:"last_call"`
	PromptTokenIDs     []int32   `parquet:"prompt_token_ids,list"`
	CompletionTokenIDs []int32   `parquet:"completion_token_ids,list"`
	LossMask           []int8    `parquet:"loss_mask,list"`
	Logprobs           []float32 `parquet:"logprobs,list"`
	RoutingExperts     []int16   `parquet:"routing_experts,list"`
	RoutingLayers      int32     `parquet:"routing_layers"`
	RoutingTopK        int32     `parquet:"routing_top_k"`
	PolicyVersion      int64     `parquet:"policy_version"`
	PolicyVersions     []int64   `parquet:"policy_versions,list" parquet-element:",dict"`
	FinishReason       string    `parquet:"finish_reason"`
	Temperature        float32   `parquet:"temperature"`
	TopP               float32   `parquet:"top_p"`
	TopK               int32     `parquet:"top_k"`
}

// BenchmarkWriteSegmentsNoSplit is BenchmarkWriteSegments/file and
// /parquet-go-bare without BYTE_STREAM_SPLIT on logprobs.
func BenchmarkWriteSegmentsNoSplit(b *testing.B) {
	segs, payload := benchSegments()
	rows := make([]segmentNoSplit, len(segs))
	for i, s := range segs {
		rows[i] = segmentNoSplit(s) // same fields, same order
	}
	b.Run("file", func(b *testing.B) {
		benchStoreWrite(b, benchFileStore(b), rows, payload)
	})
	b.Run("parquet-go-bare", func(b *testing.B) {
		benchBareWrite(b, rows, payload)
	})
}

// segmentDictRouting is schemas.Segment with dictionary-encoded expert ids:
// with at most a few hundred experts the dictionary indexes are bit-packed
// to log2(experts) bits per id before zstd, as arrow-go does by default.
type segmentDictRouting struct {
	RunID              string    `parquet:"run_id"`
	Iteration          int32     `parquet:"iteration"`
	RolloutID          string    `parquet:"rollout_id"`
	SegmentIndex       int32     `parquet:"segment_index"`
	FirstCall          int32     `parquet:"first_call"`
	LastCall           int32     `parquet:"last_call"`
	PromptTokenIDs     []int32   `parquet:"prompt_token_ids,list"`
	CompletionTokenIDs []int32   `parquet:"completion_token_ids,list"`
	LossMask           []int8    `parquet:"loss_mask,list"`
	Logprobs           []float32 `parquet:"logprobs,list" parquet-element:",split"`
	RoutingExperts     []int16   `parquet:"routing_experts,list" parquet-element:",dict"`
	RoutingLayers      int32     `parquet:"routing_layers"`
	RoutingTopK        int32     `parquet:"routing_top_k"`
	PolicyVersion      int64     `parquet:"policy_version"`
	PolicyVersions     []int64   `parquet:"policy_versions,list" parquet-element:",dict"`
	FinishReason       string    `parquet:"finish_reason"`
	Temperature        float32   `parquet:"temperature"`
	TopP               float32   `parquet:"top_p"`
	TopK               int32     `parquet:"top_k"`
}

func dictRoutingRows(segs []schemas.Segment) []segmentDictRouting {
	rows := make([]segmentDictRouting, len(segs))
	for i, s := range segs {
		rows[i] = segmentDictRouting(s)
	}
	return rows
}

// BenchmarkWriteSegmentsDictRouting is BenchmarkWriteSegments/file and
// /parquet-go-bare with routing_experts dictionary-encoded: a candidate
// change of the row type, measured before making it.
func BenchmarkWriteSegmentsDictRouting(b *testing.B) {
	segs, payload := benchSegments()
	rows := dictRoutingRows(segs)
	b.Run("file", func(b *testing.B) {
		benchStoreWrite(b, benchFileStore(b), rows, payload)
	})
	b.Run("parquet-go-bare", func(b *testing.B) {
		benchBareWrite(b, rows, payload)
	})
}

func BenchmarkReadSegments(b *testing.B) {
	segs, payload := benchSegments()
	b.Run("file", func(b *testing.B) {
		benchStoreRead(b, benchFileStore(b), segs, payload)
	})
	b.Run("s3", func(b *testing.B) {
		benchStoreRead(b, s3test.Store(b), segs, payload)
	})
	// The same parquet-go file, decoded by pqarrow from a local file with no
	// store and no sha256.
	b.Run("parquet-go-bare", func(b *testing.B) {
		st := benchFileStore(b)
		e, err := storage.WriteFile(context.Background(), st, benchKey(0), benchFooter, segs)
		if err != nil {
			b.Fatal(err)
		}
		benchBareRead(b, storeFilePath(st.(*storage.FileStore), e.Key), int64(len(segs)), payload)
	})
	b.Run("arrow-go-anchor", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "anchor.parquet")
		if _, err := writeArrowGo(p, segs); err != nil {
			b.Fatal(err)
		}
		benchBareRead(b, p, int64(len(segs)), payload)
	})
	// The storage API on a file written with dictionary-encoded routing.
	b.Run("dict-routing-file", func(b *testing.B) {
		benchStoreRead(b, benchFileStore(b), dictRoutingRows(segs), payload)
	})
}

// benchStoreWrite times storage.WriteFile of rows into st.
func benchStoreWrite[T any](b *testing.B, st storage.Store, rows []T, payload int64) {
	ctx := context.Background()
	b.SetBytes(payload)
	var e storage.FileEntry
	var err error
	i := 0
	cpu := startCPU()
	for b.Loop() {
		if e, err = storage.WriteFile(ctx, st, benchKey(i), benchFooter, rows); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cpu.report(b, i, payload)
	reportSize(b, payload, e.Size)
	if fs, ok := st.(*storage.FileStore); ok {
		reportColumns(b, storeFilePath(fs, e.Key))
	}
}

// benchStoreRead writes rows into st once, then times storage.OpenFile
// (fetch, size and sha256 check, footer and schema check) and a pass over
// every batch.
func benchStoreRead[T any](b *testing.B, st storage.Store, rows []T, payload int64) {
	ctx := context.Background()
	e, err := storage.WriteFile(ctx, st, benchKey(0), benchFooter, rows)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(payload)
	ops := 0
	cpu := startCPU()
	for b.Loop() {
		f, err := storage.OpenFile(ctx, st, e, memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		checkBatches(b, f.Batches(ctx, 0), int64(len(rows)))
		f.Close()
		ops++
	}
	cpu.report(b, ops, payload)
	reportSize(b, payload, e.Size)
	if fs, ok := st.(*storage.FileStore); ok {
		reportPeakRSS(b, readChild{Mode: "store", Root: storeRoot(fs), Entry: e}, payload)
	}
}

func benchFileStore(b *testing.B) storage.Store {
	st, err := storage.NewFileStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func storeFilePath(st *storage.FileStore, key string) string {
	return filepath.Join(storeRoot(st), filepath.FromSlash(key))
}

func storeRoot(st *storage.FileStore) string { return st.URI()[len("file://"):] }

// benchBareWrite writes rows with the storage writer's parquet-go settings
// (zstd, dictionary strings, 1 MiB page buffer) to a plain local file.
func benchBareWrite[T any](b *testing.B, rows []T, payload int64) {
	dir := b.TempDir()
	b.SetBytes(payload)
	var size int64
	i := 0
	cpu := startCPU()
	for b.Loop() {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d.parquet", i)))
		if err != nil {
			b.Fatal(err)
		}
		w := pgo.NewGenericWriter[T](f,
			pgo.Compression(&pgo.Zstd),
			pgo.DefaultEncodingFor(pgo.ByteArray, &pgo.RLEDictionary),
			pgo.PageBufferSize(1<<20))
		if _, err := w.Write(rows); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		if size, err = f.Seek(0, io.SeekCurrent); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cpu.report(b, i, payload)
	reportSize(b, payload, size)
	reportColumns(b, filepath.Join(dir, "0.parquet"))
}

// benchBareRead reads the Parquet file at path into memory and decodes every
// batch with pqarrow, as OpenFile does, without a store or a checksum.
func benchBareRead(b *testing.B, path string, rows, payload int64) {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(payload)
	ctx := context.Background()
	ops := 0
	cpu := startCPU()
	for b.Loop() {
		ops++
		if err := bareRead(ctx, path, rows); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b, ops, payload)
	reportSize(b, payload, st.Size())
	reportPeakRSS(b, readChild{Mode: "bare", Path: path, Rows: rows}, payload)
}

// bareRead reads the Parquet file at path into memory and decodes it with
// pqarrow in batches of up to 4096 rows, checking the row count.
func bareRead(ctx context.Context, path string, rows int64) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		return err
	}
	if n != rows {
		return fmt.Errorf("read %d rows, want %d", n, rows)
	}
	return nil
}

// readChild is the work of a TestReadChild process, passed as JSON in
// readChildEnv: read a file once, through the store (Mode "store") or bare
// pqarrow (Mode "bare"), or nothing ("idle").
type readChild struct {
	Mode  string            `json:"mode"`
	Root  string            `json:"root,omitempty"`
	Entry storage.FileEntry `json:"entry"`
	Path  string            `json:"path,omitempty"`
	Rows  int64             `json:"rows,omitempty"`
}

const readChildEnv = "LEGORL_STORAGE_READ_CHILD"

// TestReadChild is the child process of reportPeakRSS; without
// readChildEnv it does nothing.
func TestReadChild(t *testing.T) {
	v := os.Getenv(readChildEnv)
	if v == "" {
		t.Skip("run by the read benchmarks to measure peak RSS")
	}
	var c readChild
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	switch c.Mode {
	case "idle":
	case "bare":
		if err := bareRead(ctx, c.Path, c.Rows); err != nil {
			t.Fatal(err)
		}
	case "store":
		st, err := storage.NewFileStore(c.Root)
		if err != nil {
			t.Fatal(err)
		}
		f, err := storage.OpenFile(ctx, st, c.Entry, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for rec, err := range f.Batches(ctx, 0) {
			if err != nil {
				t.Fatal(err)
			}
			n += rec.NumRows()
		}
		f.Close()
		if n != c.Entry.Rows {
			t.Fatalf("read %d rows, want %d", n, c.Entry.Rows)
		}
	default:
		t.Fatalf("mode %q", c.Mode)
	}
	if rss, ok := selfPeakRSS(); ok {
		fmt.Printf("%s%d\n", peakRSSMark, rss)
	}
}

// peakRSSMark starts the line of TestReadChild's output that gives its peak
// RSS in bytes.
const peakRSSMark = "readchild-peak-rss-bytes="

// reportPeakRSS runs c in a child process (this test binary, TestReadChild)
// and reports its peak RSS, that of an idle child, and the peak over the
// payload, each the highest of three children. The child inherits the environment (GOGC, GOMEMLIMIT).
func reportPeakRSS(b *testing.B, c readChild, payload int64) {
	run := func(c readChild) (int64, bool) {
		arg, err := json.Marshal(c)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^TestReadChild$", "-test.count", "1", "-test.v")
		cmd.Env = append(os.Environ(), readChildEnv+"="+string(arg))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("read child: %v\n%s", err, out)
		}
		for line := range strings.Lines(string(out)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), peakRSSMark); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
		return 0, false
	}
	// The peak moves with the garbage collector's timing: the highest of
	// three children is reported.
	var idle, peak int64
	for range 3 {
		i, ok := run(readChild{Mode: "idle"})
		if !ok {
			return
		}
		p, _ := run(c)
		idle, peak = max(idle, i), max(peak, p)
	}
	b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
	b.ReportMetric(float64(idle)/1e6, "idle-RSS-MB")
	b.ReportMetric(float64(peak)/float64(payload), "RSS/payload")
}

func checkBatches(b *testing.B, batches iter.Seq2[arrow.RecordBatch, error], want int64) {
	var n int64
	for rec, err := range batches {
		if err != nil {
			b.Fatal(err)
		}
		n += rec.NumRows()
	}
	if n != want {
		b.Fatalf("read %d rows, want %d", n, want)
	}
}

// writeArrowGo builds an Arrow record of segs with the documented schema and
// writes it with pqarrow, zstd and otherwise arrow-go's default properties
// (dictionary on, PLAIN fallback, 1 MiB pages). It returns the file size.
func writeArrowGo(path string, segs []schemas.Segment) (int64, error) {
	schema, err := schemas.ArrowSchema(schemas.TableSegments)
	if err != nil {
		return 0, err
	}
	rec := segmentsRecord(schema, segs)
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
	w, err := pqarrow.NewFileWriter(schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return 0, err
	}
	if err := w.Write(rec); err != nil {
		w.Close()
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// segmentsRecord converts segment rows to one Arrow record batch.
func segmentsRecord(schema *arrow.Schema, segs []schemas.Segment) arrow.RecordBatch {
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	str := func(i int) *array.StringBuilder { return rb.Field(i).(*array.StringBuilder) }
	i32 := func(i int) *array.Int32Builder { return rb.Field(i).(*array.Int32Builder) }
	list := func(i int) (*array.ListBuilder, array.Builder) {
		lb := rb.Field(i).(*array.ListBuilder)
		return lb, lb.ValueBuilder()
	}
	for _, s := range segs {
		str(0).Append(s.RunID)
		i32(1).Append(s.Iteration)
		str(2).Append(s.RolloutID)
		i32(3).Append(s.SegmentIndex)
		i32(4).Append(s.FirstCall)
		i32(5).Append(s.LastCall)
		lb, vb := list(6)
		lb.Append(true)
		vb.(*array.Int32Builder).AppendValues(s.PromptTokenIDs, nil)
		lb, vb = list(7)
		lb.Append(true)
		vb.(*array.Int32Builder).AppendValues(s.CompletionTokenIDs, nil)
		lb, vb = list(8)
		lb.Append(true)
		vb.(*array.Int8Builder).AppendValues(s.LossMask, nil)
		lb, vb = list(9)
		lb.Append(true)
		vb.(*array.Float32Builder).AppendValues(s.Logprobs, nil)
		lb, vb = list(10)
		lb.Append(true)
		vb.(*array.Int16Builder).AppendValues(s.RoutingExperts, nil)
		i32(11).Append(s.RoutingLayers)
		i32(12).Append(s.RoutingTopK)
		rb.Field(13).(*array.Int64Builder).Append(s.PolicyVersion)
		lb, vb = list(14)
		lb.Append(true)
		vb.(*array.Int64Builder).AppendValues(s.PolicyVersions, nil)
		str(15).Append(s.FinishReason)
		rb.Field(16).(*array.Float32Builder).Append(s.Temperature)
		rb.Field(17).(*array.Float32Builder).Append(s.TopP)
		i32(18).Append(s.TopK)
	}
	return rb.NewRecordBatch()
}

// cpuMeter measures the process CPU time of a benchmark loop. On a shared
// machine wall-clock MB/s moves with other people's load; CPU seconds per
// op move much less, so MB/cpu-s is the figure to compare across runs.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{start: t, ok: ok}
}

// report adds cpu-ms/op and MB/cpu-s (payload MB per CPU second) for ops
// loop iterations.
func (m cpuMeter) report(b *testing.B, ops int, payload int64) {
	end, ok := processCPU()
	if !m.ok || !ok || ops == 0 || end <= m.start {
		return
	}
	per := (end - m.start).Seconds() / float64(ops)
	b.ReportMetric(per*1e3, "cpu-ms/op")
	b.ReportMetric(float64(payload)/1e6/per, "MB/cpu-s")
}

// reportSize reports the on-disk size and the compression ratio.
func reportSize(b *testing.B, payload, size int64) {
	b.ReportMetric(float64(size)/1e6, "file-MB")
	b.ReportMetric(float64(payload)/float64(size), "ratio")
}

// reportColumns reports the compression ratios (in-memory bytes / compressed
// column chunk bytes) of the two columns whose encoding is a choice:
// logprobs (BYTE_STREAM_SPLIT or not) and routing_experts (PLAIN or
// dictionary), the latter being most of a segments file.
func reportColumns(b *testing.B, path string) {
	segs, _ := benchSegments()
	var lpRaw, rtRaw int64
	for _, s := range segs {
		lpRaw += 4 * int64(len(s.Logprobs))
		rtRaw += 2 * int64(len(s.RoutingExperts))
	}
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		b.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	comp := map[string]int64{}
	for rg := 0; rg < md.NumRowGroups(); rg++ {
		r := md.RowGroup(rg)
		for c := 0; c < r.NumColumns(); c++ {
			cc, err := r.ColumnChunk(c)
			if err != nil {
				b.Fatal(err)
			}
			comp[cc.PathInSchema()[0]] += cc.TotalCompressedSize()
		}
	}
	if comp["logprobs"] == 0 || comp["routing_experts"] == 0 {
		b.Fatalf("%s lacks the logprobs or routing_experts column", path)
	}
	b.ReportMetric(float64(lpRaw)/float64(comp["logprobs"]), "logprobs-ratio")
	b.ReportMetric(float64(rtRaw)/float64(comp["routing_experts"]), "routing-ratio")
}
