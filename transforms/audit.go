package transforms

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(FileCheck), error](&listFilesFn{})
	register.DoFn4x1[context.Context, FileCheck, func(Finding), func(string, string), error](&verifyFileFn{})
	register.DoFn3x0[string, func(*string) bool, func(Finding)](&duplicatesFn{})
	register.Emitter1[FileCheck]()
	register.Emitter1[Finding]()
	register.Emitter2[string, string]()
	register.Iter1[string]()
	register.DoFn4x1[context.Context, []byte, func(*Finding) bool, func(AuditReport), error](&auditReportFn{})
	register.Iter1[Finding]()
	register.Emitter1[AuditReport]()
	beam.RegisterType(reflect.TypeOf(FileCheck{}))
	beam.RegisterType(reflect.TypeOf(Finding{}))
	beam.RegisterType(reflect.TypeOf(AuditReport{}))
}

// AuditReport is the outcome of the file audit of a run.
type AuditReport struct {
	RunID    string
	Files    int       // files checked
	Failures []Finding // every failed check, sorted
}

// AuditReportKey is the key of an audit's stored report.
func AuditReportKey(runID, jobID string) string {
	return schemas.AuditReportKey(runID, jobID)
}

// StoreAuditReport gathers the findings into one report, stores it
// (AuditReportKey) and returns a PCollection<AuditReport> of one element.
// It expects a PCollection<Finding>.
func StoreAuditReport(s beam.Scope, cfg AuditConfig, findings beam.PCollection) beam.PCollection {
	s = s.Scope("transforms.StoreAuditReport")
	return beam.ParDo(s, &auditReportFn{Cfg: cfg}, beam.Impulse(s), beam.SideInput{Input: findings})
}

type auditReportFn struct {
	Cfg AuditConfig
}

func (f *auditReportFn) ProcessElement(ctx context.Context, _ []byte, findings func(*Finding) bool, emit func(AuditReport)) error {
	rep := AuditReport{RunID: f.Cfg.RunID, Failures: []Finding{}}
	var x Finding
	for findings(&x) {
		if x.Check == "file" {
			rep.Files++
		}
		if !x.OK {
			rep.Failures = append(rep.Failures, x)
		}
	}
	sort.Slice(rep.Failures, func(i, j int) bool {
		a, b := rep.Failures[i], rep.Failures[j]
		if a.Check != b.Check {
			return a.Check < b.Check
		}
		return a.Key < b.Key
	})
	st, err := storage.Open(ctx, f.Cfg.Store, currentStoreOptions(Config{S3Endpoint: f.Cfg.S3Endpoint}))
	if err != nil {
		return err
	}
	body, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	job := f.Cfg.JobID
	if job == "" {
		job = "job"
	}
	if err := (sameContent{st}).Put(ctx, AuditReportKey(f.Cfg.RunID, job), bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("transforms: audit report: %w", err)
	}
	emit(rep)
	return nil
}

// FileCheck is one committed file to audit, with the manifest naming it.
type FileCheck struct {
	Manifest string // the manifest version's key
	Stage    string
	Entry    storage.FileEntry
}

// Finding is one audit check's outcome.
type Finding struct {
	Check  string // "file", "rows", "duplicate", ...
	Key    string // the object (or rollout) checked
	OK     bool
	Detail string
}

// AuditConfig names the run an audit reads.
type AuditConfig struct {
	Store      string
	S3Endpoint string
	RunID      string
	// JobID names the stored report (AuditReportKey). Defaults to "job".
	JobID string
}

// AuditFiles re-verifies every file the newest manifests of a run name:
// size and sha256 against the manifest, the footer, table and Arrow schema,
// the row count, every row against its schema's validation, and that no
// rollout appears twice in one iteration and stage. It returns a
// PCollection<Finding>: one per file, one per duplicate rollout, one for a
// run without manifests.
func AuditFiles(s beam.Scope, cfg AuditConfig) beam.PCollection {
	s = s.Scope("transforms.AuditFiles")
	files := beam.ParDo(s, &listFilesFn{Cfg: cfg}, beam.Impulse(s))
	found, ids := beam.ParDo2(s, &verifyFileFn{Cfg: cfg}, beam.Reshuffle(s, files))
	dups := beam.ParDo(s, &duplicatesFn{}, beam.GroupByKey(s, ids))
	return beam.Flatten(s, found, dups)
}

type listFilesFn struct {
	Cfg AuditConfig
}

func (f *listFilesFn) ProcessElement(ctx context.Context, _ []byte, emit func(FileCheck)) error {
	st, err := storage.Open(ctx, f.Cfg.Store, currentStoreOptions(Config{S3Endpoint: f.Cfg.S3Endpoint}))
	if err != nil {
		return err
	}
	ms, err := storage.Manifests(ctx, st, f.Cfg.RunID)
	if err != nil {
		return err
	}
	for _, m := range ms {
		ref := storage.ManifestRef{RunID: m.RunID, Iteration: m.Iteration, Stage: m.Stage}
		for _, e := range m.Files {
			emit(FileCheck{Manifest: ref.Key(m.Version), Stage: m.Stage, Entry: e})
		}
	}
	return nil
}

type verifyFileFn struct {
	Cfg AuditConfig
	st  storage.Store
}

func (f *verifyFileFn) Setup(ctx context.Context) error {
	st, err := storage.Open(ctx, f.Cfg.Store, currentStoreOptions(Config{S3Endpoint: f.Cfg.S3Endpoint}))
	f.st = st
	return err
}

// ProcessElement checks one file; ids gets "stage/iteration/rollout id" ->
// key for every rollouts row, for the duplicate check.
func (f *verifyFileFn) ProcessElement(ctx context.Context, fc FileCheck, emit func(Finding), ids func(string, string)) error {
	e := fc.Entry
	fail := func(format string, args ...any) {
		emit(Finding{Check: "file", Key: e.Key, Detail: fmt.Sprintf(format, args...)})
	}
	rc, err := f.st.Get(ctx, e.Key)
	if err != nil {
		fail("%v (named by %s)", err, fc.Manifest)
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(rc, storage.MaxFileBytes+1))
	rc.Close()
	if err != nil {
		return fmt.Errorf("transforms: audit %s: %w", e.Key, err) // transient: retry the bundle
	}
	if int64(len(data)) != e.Size {
		fail("%d bytes, the manifest says %d", len(data), e.Size)
		return nil
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != e.SHA256 {
		fail("sha256 %s, the manifest says %s", got[:12], e.SHA256[:min(12, len(e.SHA256))])
		return nil
	}
	mem := memory.NewGoAllocator()
	file, err := storage.DecodeFile(e.Key, data, mem)
	if err != nil {
		fail("%v", err)
		return nil
	}
	rows, table := file.NumRows(), file.Footer.Table
	file.Close()
	if string(table) != e.Table || rows != e.Rows {
		fail("table %s with %d rows, the manifest says %s with %d", table, rows, e.Table, e.Rows)
		return nil
	}
	n, bad, err := validateRows(table, data, func(id string) {
		ids(fmt.Sprintf("%s/%s", fc.Manifest[:lastSlash(fc.Manifest)], id), e.Key)
	})
	switch {
	case err != nil:
		fail("rows: %v", err)
	case n != rows:
		fail("%d rows decoded, the footer says %d", n, rows)
	case bad != "":
		fail("rows: %s", bad)
	default:
		emit(Finding{Check: "file", Key: e.Key, OK: true, Detail: fmt.Sprintf("%s, %d rows, sha256 %s", table, rows, e.SHA256[:12])})
	}
	return nil
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return 0
}

// validateRows decodes a file's rows into the table's row type and
// validates each; bad names the first invalid row.
func validateRows(t schemas.Table, data []byte, rolloutID func(string)) (n int64, bad string, err error) {
	switch t {
	case schemas.TableRollouts:
		return checkRows(data, func(r *schemas.Rollout) error { rolloutID(r.RolloutID); return r.Validate() })
	case schemas.TableSegments:
		// The vocabulary is the model's, unknown here: ids are checked
		// against the int32 range; the logprob audit checks the rest.
		return checkRows(data, func(r *schemas.Segment) error { return r.Validate(math.MaxInt32) })
	case schemas.TableSteps:
		return checkRows(data, (*schemas.Step).Validate)
	case schemas.TableTrainSteps:
		return checkRows(data, (*schemas.TrainStep).Validate)
	case schemas.TableReplay:
		return checkRows(data, (*schemas.Replay).Validate)
	}
	return 0, "", fmt.Errorf("unknown table %s", t)
}

// checkRows decodes data as Parquet rows of R and runs validate on each,
// all of them (so the caller sees every row); bad names the first invalid.
func checkRows[R any](data []byte, validate func(*R) error) (n int64, bad string, err error) {
	rows, err := storage.DecodeRows[R]("the file", data)
	if err != nil {
		return 0, "", err
	}
	for i := range rows {
		if err := validate(&rows[i]); err != nil && bad == "" {
			bad = fmt.Sprintf("row %d: %v", i, err)
		}
	}
	return int64(len(rows)), bad, nil
}

type duplicatesFn struct{}

func (f *duplicatesFn) ProcessElement(id string, keys func(*string) bool, emit func(Finding)) {
	var ks []string
	var k string
	for keys(&k) {
		ks = append(ks, k)
	}
	if len(ks) > 1 {
		sort.Strings(ks)
		emit(Finding{Check: "duplicate", Key: id, Detail: fmt.Sprintf("rollout listed %d times: %v", len(ks), ks)})
	}
}
