// Package tasks holds coding tasks in the SWE-bench instance format: their
// model, JSONL and Parquet input and output, static validation with typed
// reasons, unified diffs (making, parsing and checking patches), agent
// workspace preparation, and the built-in generated suite of small real
// repositories with one bug each.
//
// Running tests (validation at ingest, grading) needs a sandbox and lives in
// sandbox/grade; this package only names the reasons (sentinel errors).
package tasks

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Splits of the built-in suite.
const (
	SplitTrain         = "train"          // instances to train on (RL, and SFT when a suite has no sft split)
	SplitSFT           = "sft"            // instances whose demonstrations warm-start the policy, never rolled out by RL
	SplitHeldout       = "heldout"        // held-out instances of the training families: the headline metric
	SplitHeldoutFamily = "heldout_family" // whole families never trained on: the generalization check
)

// Test runners.
const (
	RunnerPytest = "pytest" // Python: tests are pytest node ids ("tests/test_x.py::test_y")
	RunnerGoTest = "gotest" // Go: tests are test function names ("TestY")
)

// Instance is one task, with SWE-bench's field names where SWE-bench has the
// field. FAIL_TO_PASS and PASS_TO_PASS read from either a JSON list or a
// string holding one (as SWE-bench's datasets store them).
type Instance struct {
	InstanceID       string   `json:"instance_id" parquet:"instance_id"`
	Repo             string   `json:"repo" parquet:"repo"`               // owner/name, for humans
	BaseCommit       string   `json:"base_commit" parquet:"base_commit"` // the commit the agent starts from
	ProblemStatement string   `json:"problem_statement" parquet:"problem_statement"`
	FailToPass       TestList `json:"FAIL_TO_PASS" parquet:"FAIL_TO_PASS,list"` // fail at base, pass with the gold patch
	PassToPass       TestList `json:"PASS_TO_PASS" parquet:"PASS_TO_PASS,list"` // pass at base and with the gold patch
	TestPatch        string   `json:"test_patch" parquet:"test_patch"`          // adds the hidden tests; never shown to the agent
	Patch            string   `json:"patch" parquet:"patch"`                    // the gold fix; never shown to the agent
	HintsText        string   `json:"hints_text,omitempty" parquet:"hints_text,optional"`
	Version          string   `json:"version,omitempty" parquet:"version,optional"`
	CreatedAt        string   `json:"created_at,omitempty" parquet:"created_at,optional"`

	// Fields of this project.
	Snapshot string `json:"snapshot,omitempty" parquet:"snapshot,optional"` // git repository holding base_commit; relative paths are relative to the suite file
	Image    string `json:"image,omitempty" parquet:"image,optional"`       // container image for the docker backend
	Language string `json:"language,omitempty" parquet:"language,optional"` // "python" or "go"
	Runner   string `json:"test_runner,omitempty" parquet:"test_runner,optional"`
	Family   string `json:"family,omitempty" parquet:"family,optional"` // bug family of generated tasks
	// Template is the generator's template within the family
	// ("family/name"): instances of one template share a bug and differ in
	// names, numbers, wording and layout.
	Template string `json:"template,omitempty" parquet:"template,optional"`
	Split    string `json:"split,omitempty" parquet:"split,optional"`
}

// TestList is a list of test ids.
type TestList []string

// TestRunner returns the runner of the instance: Runner, or the default of
// its language.
func (in *Instance) TestRunner() string {
	if in.Runner != "" {
		return in.Runner
	}
	switch in.Language {
	case "go":
		return RunnerGoTest
	default:
		return RunnerPytest
	}
}

// SnapshotDir returns the snapshot path resolved against the folder of the
// suite file (base).
func (in *Instance) SnapshotDir(base string) string {
	if in.Snapshot == "" || filepath.IsAbs(in.Snapshot) {
		return in.Snapshot
	}
	return filepath.Join(base, in.Snapshot)
}

// Sentinel errors: the typed reasons an instance is rejected.
var (
	ErrInvalid         = errors.New("tasks: invalid instance")                 // a field is missing or malformed
	ErrSnapshot        = errors.New("tasks: snapshot unusable")                // repository missing, or base_commit not in it
	ErrPatch           = errors.New("tasks: patch invalid")                    // a patch does not parse, is refused, or does not apply
	ErrGoldFails       = errors.New("tasks: gold patch fails tests")           // with the gold patch a FAIL_TO_PASS or PASS_TO_PASS test fails
	ErrFlaky           = errors.New("tasks: flaky tests")                      // repeated runs of the gold patch disagree
	ErrF2PPassesOnBase = errors.New("tasks: FAIL_TO_PASS test passes on base") // the bug is not caught
	ErrP2PFailsOnBase  = errors.New("tasks: PASS_TO_PASS test fails on base")
	ErrEnv             = errors.New("tasks: environment failed") // the sandbox failed while validating; not the instance's fault
	ErrDuplicate       = errors.New("tasks: duplicate instance_id")
)

// Reason returns the short name of the sentinel wrapped by err ("gold_fails",
// ...), "ok" for nil and "error" for anything else. Reports print it.
func Reason(err error) string {
	if err == nil {
		return "ok"
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "error"
}

var reasons = []struct {
	err  error
	name string
}{
	{ErrInvalid, "invalid"}, {ErrSnapshot, "snapshot"}, {ErrPatch, "patch_invalid"},
	{ErrGoldFails, "gold_fails"}, {ErrFlaky, "flaky"}, {ErrF2PPassesOnBase, "f2p_passes_on_base"},
	{ErrP2PFailsOnBase, "p2p_fails_on_base"}, {ErrEnv, "env_failed"}, {ErrDuplicate, "duplicate"},
}

// Check validates the fields of an instance without running anything:
// required fields present, test ids well formed, known runner, and both
// patches parse and pass the patch policy (no binary, no paths out of the
// repository).
func (in *Instance) Check() error {
	if in.InstanceID == "" {
		return fmt.Errorf("%w: instance_id is empty", ErrInvalid)
	}
	if strings.ContainsAny(in.InstanceID, "/\\\x00\n") || in.InstanceID == "." || in.InstanceID == ".." {
		return fmt.Errorf("%w: %s: instance_id has a path separator or control character", ErrInvalid, in.InstanceID)
	}
	if in.BaseCommit == "" {
		return fmt.Errorf("%w: %s: base_commit is empty", ErrInvalid, in.InstanceID)
	}
	if !isHex(in.BaseCommit) {
		return fmt.Errorf("%w: %s: base_commit %q is not a hex commit id", ErrInvalid, in.InstanceID, in.BaseCommit)
	}
	if len(in.FailToPass) == 0 {
		return fmt.Errorf("%w: %s: FAIL_TO_PASS is empty", ErrInvalid, in.InstanceID)
	}
	if in.Snapshot == "" && in.Image == "" {
		return fmt.Errorf("%w: %s: neither snapshot nor image is set", ErrInvalid, in.InstanceID)
	}
	r := in.TestRunner()
	if r != RunnerPytest && r != RunnerGoTest {
		return fmt.Errorf("%w: %s: unknown test_runner %q", ErrInvalid, in.InstanceID, r)
	}
	seen := map[string]bool{}
	for _, id := range append(append([]string{}, in.FailToPass...), in.PassToPass...) {
		if err := checkTestID(r, id); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, in.InstanceID, err)
		}
		if seen[id] {
			return fmt.Errorf("%w: %s: test %q listed twice", ErrInvalid, in.InstanceID, id)
		}
		seen[id] = true
	}
	if in.Patch == "" {
		return fmt.Errorf("%w: %s: patch (gold) is empty", ErrInvalid, in.InstanceID)
	}
	if in.TestPatch == "" {
		return fmt.Errorf("%w: %s: test_patch is empty", ErrInvalid, in.InstanceID)
	}
	for _, p := range []struct{ name, text string }{{"patch", in.Patch}, {"test_patch", in.TestPatch}} {
		if _, err := ParsePatch(p.text, DefaultPatchLimits); err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrPatch, in.InstanceID, p.name, err)
		}
	}
	return nil
}

func checkTestID(runner, id string) error {
	if id == "" || strings.ContainsAny(id, "\x00\n\r") || strings.HasPrefix(id, "-") {
		return fmt.Errorf("bad test id %q", id)
	}
	if runner == RunnerGoTest {
		for _, c := range id {
			if !(c == '_' || c == '/' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return fmt.Errorf("bad go test name %q", id)
			}
		}
	}
	return nil
}

func isHex(s string) bool {
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
