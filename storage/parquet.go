package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"os"
	"reflect"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	aparquet "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"

	"github.com/legorl/legorl/schemas"
)

// WriterOptions configure NewWriter.
type WriterOptions struct {
	// TempDir holds the file while it is written. Defaults to os.TempDir().
	TempDir string
	// PageBufferBytes is parquet-go's page buffer size. Defaults to 1 MiB.
	PageBufferBytes int
	// RowGroupBytes is the payload a row group holds before the writer
	// flushes it and starts the next: rows are counted at their in-memory
	// size (list elements at their Go widths, strings at their length), and
	// a row group ends at the first row that reaches the target. Small row
	// groups bound the memory of the writer, which buffers one row group,
	// and of readers, which decode one at a time (File.Batches). Defaults to
	// DefaultRowGroupBytes.
	RowGroupBytes int64
}

// DefaultRowGroupBytes is the default WriterOptions.RowGroupBytes: 8 MiB of
// payload, about 20 rows of a segments table with MoE routing, and the
// whole file for the small tables (rollouts, steps, train steps).
const DefaultRowGroupBytes = 8 << 20

// Writer writes rows of type T (a schemas row type) as one Parquet file and
// publishes it write-once on Close. Columns are zstd-compressed; encodings
// are tagged in the row types (BYTE_STREAM_SPLIT for logprobs, 7% smaller
// than plain zstd; a dictionary for routing ids, which dominate file size).
// Rows go out in row groups of about WriterOptions.RowGroupBytes, so the
// writer holds one row group, not the file. Until Close succeeds nothing is
// in the store.
type Writer[T any] struct {
	st       Putter
	key      string
	table    string
	tmp      *os.File
	sum      hash.Hash
	pw       *parquet.GenericWriter[T]
	rows     int64
	target   int64 // row group payload target, bytes
	buffered int64 // payload of the row group being written, bytes
	closed   bool
}

// NewWriter starts a Parquet file that Close will put at key. The footer is
// validated and written into the file's key/value metadata.
func NewWriter[T any](st Putter, key string, footer schemas.Footer, opts WriterOptions) (*Writer[T], error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := footer.Validate(); err != nil {
		return nil, fmt.Errorf("storage: writer for %s: %w", key, err)
	}
	if err := checkRowType[T](footer.Table); err != nil {
		return nil, fmt.Errorf("storage: writer for %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(opts.TempDir, "legorl-*.parquet")
	if err != nil {
		return nil, fmt.Errorf("storage: writer for %s: %w", key, err)
	}
	os.Remove(tmp.Name()) // unlinked at once: a crash leaves nothing behind
	w := &Writer[T]{st: st, key: key, table: string(footer.Table), tmp: tmp, sum: sha256.New(), target: opts.RowGroupBytes}
	if w.target <= 0 {
		w.target = DefaultRowGroupBytes
	}
	pageBuf := opts.PageBufferBytes
	if pageBuf <= 0 {
		pageBuf = 1 << 20
	}
	wopts := []parquet.WriterOption{
		parquet.Compression(&parquet.Zstd),
		// Strings are dictionary-encoded: ids and enums repeat within a file,
		// and arrow-go v18.8 leaks a buffer per page when it decodes
		// parquet-go's default DELTA_LENGTH_BYTE_ARRAY.
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.RLEDictionary),
		parquet.PageBufferSize(pageBuf),
		parquet.CreatedBy("legorl", footer.CodeVersion, ""),
	}
	for k, v := range footer.KeyValues() {
		wopts = append(wopts, parquet.KeyValueMetadata(k, v))
	}
	w.pw = parquet.NewGenericWriter[T](io.MultiWriter(tmp, w.sum), wopts...)
	return w, nil
}

// checkRowType reports whether rows of type T have table t's columns, by
// name and in order, so that a writer never commits a file that every
// reader would refuse as ErrCorrupt.
func checkRowType[T any](t schemas.Table) error {
	want, err := schemas.ArrowSchema(t)
	if err != nil {
		return err
	}
	got := parquet.SchemaOf(new(T)).Fields()
	if len(got) != want.NumFields() {
		return fmt.Errorf("%w: %T rows have %d columns, table %s has %d", ErrCorrupt, *new(T), len(got), t, want.NumFields())
	}
	for i, f := range got {
		if f.Name() != want.Field(i).Name {
			return fmt.Errorf("%w: column %d of %T rows is %s, table %s has %s", ErrCorrupt, i, *new(T), f.Name(), t, want.Field(i).Name)
		}
	}
	return nil
}

// Write appends rows, ending a row group each time its payload reaches the
// writer's target.
func (w *Writer[T]) Write(rows []T) error {
	if w.closed {
		return fmt.Errorf("storage: write %s: writer is closed", w.key)
	}
	for len(rows) > 0 {
		n := 0
		for n < len(rows) && w.buffered < w.target {
			w.buffered += payloadBytes(reflect.ValueOf(&rows[n]).Elem())
			n++
		}
		if n > 0 {
			if _, err := w.pw.Write(rows[:n]); err != nil {
				return fmt.Errorf("storage: write %s: %w", w.key, err)
			}
			w.rows += int64(n)
			rows = rows[n:]
		}
		if w.buffered >= w.target {
			if err := w.pw.Flush(); err != nil {
				return fmt.Errorf("storage: write %s: %w", w.key, err)
			}
			w.buffered = 0
		}
	}
	return nil
}

// payloadBytes returns the in-memory size of a row's values: fixed-size
// fields at their size, strings at their length, slices at their length
// times their element's payload. It is what a reader decodes, so row groups
// cut by it bound the reader's memory.
func payloadBytes(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.String:
		return int64(v.Len())
	case reflect.Slice:
		et := v.Type().Elem()
		switch et.Kind() {
		case reflect.String, reflect.Slice, reflect.Struct, reflect.Pointer:
			var n int64
			for i := range v.Len() {
				n += payloadBytes(v.Index(i))
			}
			return n
		}
		return int64(v.Len()) * int64(et.Size())
	case reflect.Struct:
		var n int64
		for i := range v.NumField() {
			n += payloadBytes(v.Field(i))
		}
		return n
	case reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return payloadBytes(v.Elem())
	}
	return int64(v.Type().Size())
}

// Close finishes the file and puts it in the store. On any error nothing is
// visible at the key (puts are atomic) and the error is returned. Close
// returns the entry to commit in a manifest.
func (w *Writer[T]) Close(ctx context.Context) (FileEntry, error) {
	if w.closed {
		return FileEntry{}, fmt.Errorf("storage: close %s: writer is closed", w.key)
	}
	w.closed = true
	defer w.tmp.Close()
	if err := w.pw.Close(); err != nil {
		return FileEntry{}, fmt.Errorf("storage: finish %s: %w", w.key, err)
	}
	size, err := w.tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return FileEntry{}, fmt.Errorf("storage: finish %s: %w", w.key, err)
	}
	if _, err := w.tmp.Seek(0, io.SeekStart); err != nil {
		return FileEntry{}, fmt.Errorf("storage: finish %s: %w", w.key, err)
	}
	if err := w.st.Put(ctx, w.key, w.tmp, size); err != nil {
		return FileEntry{}, err
	}
	return FileEntry{Table: w.table, Key: w.key, Size: size, Rows: w.rows, SHA256: hex.EncodeToString(w.sum.Sum(nil))}, nil
}

// Abort discards the file; nothing reaches the store.
func (w *Writer[T]) Abort() {
	if !w.closed {
		w.closed = true
		w.tmp.Close()
	}
}

// WriteFile writes rows as one file at key and returns its entry.
func WriteFile[T any](ctx context.Context, st Putter, key string, footer schemas.Footer, rows []T) (FileEntry, error) {
	w, err := NewWriter[T](st, key, footer, WriterOptions{})
	if err != nil {
		return FileEntry{}, err
	}
	if err := w.Write(rows); err != nil {
		w.Abort()
		return FileEntry{}, err
	}
	return w.Close(ctx)
}

// File is a verified Parquet file, read as Arrow batches: from the store's
// local file when there is one (FileStore), otherwise from memory.
type File struct {
	Name   string
	Footer schemas.Footer
	Schema *arrow.Schema
	rows   int64
	pf     *file.Reader
	fr     *pqarrow.FileReader
	src    io.Closer // the local file read, if any; closed by Close
}

// MaxFileBytes bounds the size of a data file a reader loads. Defaults to 4 GiB.
const MaxFileBytes = 4 << 30

// OpenFile fetches a committed file, checks its size and sha256 against the
// manifest entry, and decodes its footer. A truncated or altered file fails
// with ErrChecksum naming the key; it is never decoded. When the store's
// object is a local file (FileStore), it is hashed in one streaming pass
// and then decoded from the file itself, so a reader holds only the batch
// it decodes; objects of other stores (S3) are fetched into memory whole.
// The local file is trusted not to change between the check and the read:
// the store never rewrites an object.
func OpenFile(ctx context.Context, st Getter, e FileEntry, mem memory.Allocator) (*File, error) {
	src, size, closer, err := openVerified(ctx, st, e)
	if err != nil {
		return nil, err
	}
	f, err := decodeFile(e.Key, src, size, mem)
	if err != nil {
		closer.Close()
		return nil, err
	}
	f.src = closer
	if string(f.Footer.Table) != e.Table {
		f.Close()
		return nil, fmt.Errorf("%w: %s holds table %s, manifest says %s", ErrCorrupt, e.Key, f.Footer.Table, e.Table)
	}
	if f.rows != e.Rows {
		f.Close()
		return nil, fmt.Errorf("%w: %s holds %d rows, manifest says %d", ErrCorrupt, e.Key, f.rows, e.Rows)
	}
	return f, nil
}

// openVerified opens a committed file and checks its size and sha256
// against the manifest entry: a local file in place, read twice (hashed,
// then decoded), any other object read into memory once.
func openVerified(ctx context.Context, st Getter, e FileEntry) (io.ReaderAt, int64, io.Closer, error) {
	if e.Size < 0 || e.Size > MaxFileBytes {
		return nil, 0, nil, fmt.Errorf("%w: %s is %d bytes, not in [0, %d]", ErrCorrupt, e.Key, e.Size, MaxFileBytes)
	}
	rc, err := st.Get(ctx, e.Key)
	if err != nil {
		return nil, 0, nil, err
	}
	local, ok := rc.(*os.File)
	if !ok {
		defer rc.Close()
		data, err := readVerified(ctx, rc, e)
		if err != nil {
			return nil, 0, nil, err
		}
		return bytes.NewReader(data), int64(len(data)), io.NopCloser(nil), nil
	}
	if err := checkSum(ctx, local, io.Discard, e); err != nil {
		local.Close()
		return nil, 0, nil, err
	}
	return local, e.Size, local, nil
}

// ReadRows is the typed read beside the typed writer: it fetches and
// verifies a committed file as OpenFile does and decodes its rows into T,
// the row type of its table (schemas.Rollout, Segment, Step, TrainStep).
func ReadRows[T any](ctx context.Context, st Getter, e FileEntry) ([]T, error) {
	data, err := fetchVerified(ctx, st, e)
	if err != nil {
		return nil, err
	}
	rows, table, err := decodeRows[T](e.Key, data)
	if err != nil {
		return nil, err
	}
	if string(table) != e.Table {
		return nil, fmt.Errorf("%w: %s holds table %s, manifest says %s", ErrCorrupt, e.Key, table, e.Table)
	}
	if int64(len(rows)) != e.Rows {
		return nil, fmt.Errorf("%w: %s holds %d rows, manifest says %d", ErrCorrupt, e.Key, len(rows), e.Rows)
	}
	return rows, nil
}

// DecodeRows decodes the Parquet bytes of a legorl file named name into
// rows of T: the footer must be a legorl footer, the columns the table's,
// and T that table's row type. Malformed input gives an ErrCorrupt error
// naming the file, never a panic.
func DecodeRows[T any](name string, data []byte) ([]T, error) {
	rows, _, err := decodeRows[T](name, data)
	return rows, err
}

func decodeRows[T any](name string, data []byte) (rows []T, table schemas.Table, err error) {
	f, err := DecodeFile(name, data, memory.DefaultAllocator)
	if err != nil {
		return nil, "", err
	}
	table = f.Footer.Table
	f.Close()
	if err := checkRowType[T](table); err != nil {
		return nil, "", fmt.Errorf("storage: read %s: %w", name, err)
	}
	defer recoverCorrupt(name, &err)
	rows, err = parquet.Read[T](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	return rows, table, nil
}

// fetchVerified reads a committed file whole and checks its size and
// sha256 against the manifest entry.
func fetchVerified(ctx context.Context, st Getter, e FileEntry) ([]byte, error) {
	if e.Size < 0 || e.Size > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes, not in [0, %d]", ErrCorrupt, e.Key, e.Size, MaxFileBytes)
	}
	rc, err := st.Get(ctx, e.Key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return readVerified(ctx, rc, e)
}

// readVerified reads r whole and checks its size and sha256 against e.
func readVerified(ctx context.Context, r io.Reader, e FileEntry) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, e.Size))
	if err := checkSum(ctx, r, buf, e); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkSum copies r to w and checks its size and sha256 against e.
func checkSum(ctx context.Context, r io.Reader, w io.Writer, e FileEntry) error {
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sum), io.LimitReader(ctxReader{ctx, r}, e.Size+1))
	if err != nil {
		return fmt.Errorf("storage: read %s: %w", e.Key, err)
	}
	if n != e.Size {
		return fmt.Errorf("%w: %s is %d bytes, manifest says %d", ErrChecksum, e.Key, n, e.Size)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("%w: %s has sha256 %s, manifest says %s", ErrChecksum, e.Key, got[:12], short(e.SHA256))
	}
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// DecodeFile decodes Parquet bytes named name: the footer metadata must be a
// legorl footer and the Arrow schema must be the table's documented one.
// Malformed input gives an ErrCorrupt error naming the file, never a panic.
func DecodeFile(name string, data []byte, mem memory.Allocator) (f *File, err error) {
	return decodeFile(name, bytes.NewReader(data), int64(len(data)), mem)
}

// readBufferBytes is the buffer through which a column chunk is read, a
// page at a time, instead of whole: 1 MiB, parquet-go's page size.
const readBufferBytes = 1 << 20

// decodeFile is DecodeFile over the size bytes of src.
func decodeFile(name string, src io.ReaderAt, size int64, mem memory.Allocator) (f *File, err error) {
	defer recoverCorrupt(name, &err)
	// The reader starts from the footer; a file must also begin with the
	// magic, or it is a tail of one.
	var magic [4]byte
	if _, err := src.ReadAt(magic[:], 0); err != nil || string(magic[:]) != "PAR1" {
		return nil, fmt.Errorf("%w: %s: no Parquet magic at the start", ErrCorrupt, name)
	}
	props := aparquet.NewReaderProperties(mem)
	props.BufferedStreamEnabled = true
	props.BufferSize = readBufferBytes
	pf, err := file.NewParquetReader(io.NewSectionReader(src, 0, size), file.WithReadProps(props))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	kv := map[string]string{}
	for _, e := range pf.MetaData().KeyValueMetadata() {
		if e.Value != nil {
			kv[e.Key] = *e.Value
		}
	}
	footer, err := schemas.ParseFooter(kv)
	if err != nil {
		pf.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, mem)
	if err != nil {
		pf.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	got, err := fr.Schema()
	if err != nil {
		pf.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	want, _ := schemas.ArrowSchema(footer.Table) // footer.Validate checked the table
	if err := SameColumns(want, got); err != nil {
		pf.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	return &File{Name: name, Footer: footer, Schema: want, rows: pf.NumRows(), pf: pf, fr: fr}, nil
}

// SameColumns reports whether got has want's column names and types, in
// order, ignoring field metadata.
func SameColumns(want, got *arrow.Schema) error {
	if len(want.Fields()) != len(got.Fields()) {
		return fmt.Errorf("schema has %d columns, want %d", len(got.Fields()), len(want.Fields()))
	}
	for i, w := range want.Fields() {
		g := got.Field(i)
		if g.Name != w.Name || !arrow.TypeEqual(g.Type, w.Type) {
			return fmt.Errorf("column %d is %s %s, want %s %s", i, g.Name, g.Type, w.Name, w.Type)
		}
	}
	return nil
}

func recoverCorrupt(name string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s: decoder failed: %v", ErrCorrupt, name, r)
	}
}

// NumRows returns the number of rows in the file.
func (f *File) NumRows() int64 { return f.rows }

// Batches yields the file's rows as Arrow record batches, row group by row
// group: a batch never spans two row groups and holds up to batchRows rows
// (0: as many as decode in about DecodeBatchBytes, at most 4096). Only the
// batch being read is decoded, so memory is bounded by a batch, not the
// file. A batch is valid until the next iteration; Retain it to keep it
// longer. Decoding errors end the sequence with an ErrCorrupt error.
func (f *File) Batches(ctx context.Context, batchRows int) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		err := f.batches(ctx, batchRows, yield)
		if err != nil && !errors.Is(err, errStop) {
			yield(nil, err)
		}
	}
}

var errStop = errors.New("stop")

// DecodeBatchBytes is the decoding memory File.Batches aims at per batch
// when the caller leaves the batch size to it: 4 MiB, about two rows of a
// segments table with MoE routing (each routing id takes 8 bytes to decode:
// a 4-byte INT32 and two 2-byte levels); narrow tables such as rollouts
// reach the 4096-row cap first.
const DecodeBatchBytes = 4 << 20

// maxBatchRows caps the rows of a batch whose size is left to File.Batches.
const maxBatchRows = 4096

func (f *File) batches(ctx context.Context, batchRows int, yield func(arrow.RecordBatch, error) bool) (err error) {
	defer recoverCorrupt(f.Name, &err)
	for rg := range f.pf.NumRowGroups() {
		n := int64(batchRows)
		if n <= 0 {
			n = f.autoBatchRows(rg)
		}
		if err := f.rowGroup(ctx, rg, n, yield); err != nil {
			return err
		}
	}
	return nil
}

// autoBatchRows returns how many rows of row group rg decode in about
// DecodeBatchBytes, estimated from its column chunks' metadata: each value
// at its physical width (byte arrays at their uncompressed size) plus two
// bytes per definition or repetition level.
func (f *File) autoBatchRows(rg int) int64 {
	md := f.pf.MetaData()
	g := md.RowGroup(rg)
	rows := g.NumRows()
	if rows <= 0 {
		return 1
	}
	var decoded int64
	for c := range g.NumColumns() {
		cc, err := g.ColumnChunk(c)
		if err != nil {
			return 1 // a corrupt chunk fails when read; read it row by row
		}
		col := md.Schema.Column(c)
		n := cc.NumValues()
		switch col.PhysicalType() {
		case aparquet.Types.ByteArray:
			decoded += cc.TotalUncompressedSize()
		case aparquet.Types.FixedLenByteArray:
			decoded += n * int64(col.TypeLength())
		case aparquet.Types.Boolean:
			decoded += n
		case aparquet.Types.Int32, aparquet.Types.Float:
			decoded += 4 * n
		case aparquet.Types.Int96:
			decoded += 12 * n
		default:
			decoded += 8 * n
		}
		if col.MaxDefinitionLevel() > 0 {
			decoded += 2 * n
		}
		if col.MaxRepetitionLevel() > 0 {
			decoded += 2 * n
		}
	}
	perRow := max(decoded/rows, 1)
	return min(max(DecodeBatchBytes/perRow, 1), rows, maxBatchRows)
}

// rowGroup yields row group rg in batches of n rows.
func (f *File) rowGroup(ctx context.Context, rg int, n int64, yield func(arrow.RecordBatch, error) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.fr.Props.BatchSize = n
	rr, err := f.fr.GetRecordReader(ctx, nil, []int{rg})
	if err != nil {
		return fmt.Errorf("%w: %s: row group %d: %v", ErrCorrupt, f.Name, rg, err)
	}
	defer rr.Release()
	for rr.Next() {
		if !yield(rr.RecordBatch(), nil) {
			return errStop
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s: row group %d: %v", ErrCorrupt, f.Name, rg, err)
	}
	return nil
}

// Close releases the file.
func (f *File) Close() error {
	err := f.pf.Close()
	if f.src != nil {
		if cerr := f.src.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// CountRows reads every committed file of table in a run as Arrow batches
// (each file verified as OpenFile does) and returns how many files and
// rows it read.
func CountRows(ctx context.Context, st Store, runID, table string) (files int, rows int64, err error) {
	fes, err := TableFiles(ctx, st, runID, table)
	if err != nil {
		return 0, 0, err
	}
	for _, fe := range fes {
		f, err := OpenFile(ctx, st, fe, memory.DefaultAllocator)
		if err != nil {
			return 0, 0, err
		}
		for b, err := range f.Batches(ctx, 0) {
			if err != nil {
				f.Close()
				return 0, 0, err
			}
			rows += b.NumRows()
		}
		f.Close()
	}
	return len(fes), rows, nil
}
