package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legorl/legorl/sandbox/local/localtest"
	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/schemas/synth"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/s3test"
	"github.com/legorl/legorl/storage/synthstore"
	"github.com/legorl/legorl/tasks/builtin"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) {
	// Re-exec hook: the child runs the real main, exit code and all.
	if os.Getenv("LEGORL_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"legorl"}, strings.Fields(os.Getenv("LEGORL_TEST_ARGS"))...)
		main()
		return
	}
	localtest.MustInstall() // the sandbox init make build ships, beside this binary
	s3test.Main(m)
}

func runCLI(t *testing.T, env *environ, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), env, args, &o, &e)
	return code, o.String(), e.String()
}

func testEnv(getenv map[string]string) *environ {
	return readEnviron(func(k string) string { return getenv[k] })
}

func TestBadInputIsOneLineExit2(t *testing.T) {
	dir := t.TempDir()
	store := "file://" + dir
	tests := []struct {
		name string
		args []string
		want string // a fragment the message must contain
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"export", "--bogus"}, "flag provided but not defined: -bogus"},
		{"stray argument", []string{"version", "extra"}, `unexpected argument "extra"`},
		{"missing run", []string{"export", "--table", "rollouts"}, "--run and --table are required"},
		{"unknown table", []string{"export", "--run", "r", "--table", "trajectories"}, `unknown table "trajectories"`},
		{"unknown format", []string{"export", "--store", store, "--run", "r", "--table", "steps", "--format", "xml"}, `unknown format "xml"`},
		{"bad run id", []string{"export", "--store", store, "--run", "../etc", "--table", "steps"}, `run id "../etc"`},
		{"uri without scheme", []string{"export", "--store", "/tmp/x", "--run", "r", "--table", "steps"}, "invalid store URI"},
		{"unknown scheme", []string{"export", "--store", "ftp://host/x", "--run", "r", "--table", "steps"}, `unknown scheme "ftp"`},
		{"s3 without bucket", []string{"export", "--store", "s3://", "--run", "r", "--table", "steps"}, "no bucket"},
		{"endpoint without scheme", []string{"export", "--store", "s3://b", "--s3-endpoint", "localhost:9000", "--run", "r", "--table", "steps"}, "want http://host:port"},
		{"unreachable endpoint", []string{"export", "--store", "s3://b", "--s3-endpoint", "http://127.0.0.1:1", "--run", "r", "--table", "steps"}, "127.0.0.1:1"},
		{"run not in store", []string{"export", "--store", store, "--run", "nope", "--table", "steps"}, `run "nope" has no committed steps files`},
		{"output folder missing", []string{"export", "--store", store, "--run", "nope", "--table", "steps", "--out", "/nonexistent/dir/x.jsonl"}, "no committed"},
		{"demo bad size", []string{"demo", "--store", store, "--tasks", "0"}, "must be positive"},
		{"demo bad grade count", []string{"demo", "--store", store, "--grade-tasks", "-1"}, "--grade-tasks must be in [0, 100]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, testEnv(nil), tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stdout %q)", code, stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "legorl") {
				t.Errorf("stderr is not one line starting with legorl: %q", stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not name the problem (%q)", stderr, tt.want)
			}
		})
	}
}

// TestRealBinaryExitCode runs main itself in a child process: a bad flag
// must exit 2 with one line and no panic trace.
func TestRealBinaryExitCode(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LEGORL_TEST_RUN_MAIN=1", "LEGORL_TEST_ARGS=export --store ftp://x --run r --table steps")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2", err)
	}
	if s := stderr.String(); strings.Count(s, "\n") != 1 || strings.Contains(s, "goroutine") {
		t.Fatalf("stderr: %q", s)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI(t, testEnv(nil), "version")
	if code != 0 || !strings.HasPrefix(out, "legorl dev (schema 2,") {
		t.Fatalf("exit %d, out %q", code, out)
	}
	if code, _, _ := runCLI(t, testEnv(nil), "version", "-h"); code != 0 {
		t.Fatalf("-h exits %d", code)
	}
}

// writeFixedRun writes a small deterministic run (fixed seed) to st.
func writeFixedRun(t *testing.T, st storage.Store, runID string) {
	t.Helper()
	its := synth.Run(synth.Config{RunID: runID, Seed: 7, Iterations: 2, Tasks: 2, GroupSize: 2, Turns: 2,
		PromptTokens: 4, TurnTokens: 3, ObsTokens: 2, VocabSize: 100, MoELayers: 1, TopK: 2, Experts: 4})
	for i, it := range its {
		if _, err := synthstore.WriteIteration(context.Background(), st, runID, i, it, synthstore.Options{ConfigHash: "synthetic", CodeVersion: version, VocabSize: 100}); err != nil {
			t.Fatal(err)
		}
		// The replay table, as legorl audit --replay writes it.
		ref := storage.ManifestRef{RunID: runID, Iteration: i, Stage: schemas.StageReplay}
		e, err := storage.WriteFile(context.Background(), st, ref.DataKey(string(schemas.TableReplay), "synth-replay"),
			schemas.Footer{SchemaVersion: schemas.Version, Table: schemas.TableReplay, RunID: runID, ConfigHash: "synthetic", CodeVersion: version}, it.Replays)
		if err == nil {
			_, err = storage.Commit(context.Background(), st, ref, []storage.FileEntry{e})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestExportGolden exports every table of a fixed run in both formats and
// compares with golden files.
func TestExportGolden(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	writeFixedRun(t, st, "golden")
	for _, tab := range schemas.Tables() {
		for _, format := range []string{"jsonl", "csv"} {
			t.Run(string(tab)+"."+format, func(t *testing.T) {
				code, out, stderr := runCLI(t, testEnv(nil), "export", "--store", "file://"+dir, "--run", "golden", "--table", string(tab), "--format", format)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				golden := filepath.Join("testdata", "export", string(tab)+"."+format+".golden")
				if *update {
					os.MkdirAll(filepath.Dir(golden), 0o755)
					if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./cmd/legorl -update)", err)
				}
				if out != string(want) {
					t.Fatalf("export differs from %s:\n%s", golden, firstDiff(out, string(want)))
				}
			})
		}
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			return "got:  " + g[i] + "\nwant: " + w[i]
		}
	}
	return "lengths differ"
}

// TestExportToFileIsAtomic: a failed export leaves no output file; a good one
// leaves the whole file.
func TestExportToFileIsAtomic(t *testing.T) {
	dir := t.TempDir()
	st, _ := storage.NewFileStore(filepath.Join(dir, "store"))
	writeFixedRun(t, st, "r")
	out := filepath.Join(dir, "out.csv")
	// Corrupt one committed file: the export must fail and write nothing.
	files, err := storage.TableFiles(context.Background(), st, "r", "segments")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "store", files[len(files)-1].Key)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 0xff
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, testEnv(nil), "export", "--store", "file://"+dir+"/store", "--run", "r", "--table", "segments", "--out", out)
	if code != 2 || !strings.Contains(stderr, "checksum mismatch") || !strings.Contains(stderr, files[len(files)-1].Key) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("partial output left behind: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	code, _, stderr = runCLI(t, testEnv(nil), "export", "--store", "file://"+dir+"/store", "--run", "r", "--table", "rollouts", "--out", out, "--format", "csv")
	if code != 0 {
		t.Fatal(stderr)
	}
	if b, _ := os.ReadFile(out); strings.Count(string(b), "\n") != 1+8 {
		t.Fatalf("want header + 8 rows, got %q", b)
	}
}

// TestDemoAndExportOnS3 runs the demo and an export against the real S3
// server, with the endpoint and credentials taken from the environment the
// way users set them.
func TestDemoAndExportOnS3(t *testing.T) {
	srv := s3test.Endpoint(t)
	env := testEnv(map[string]string{
		"LEGORL_S3_ENDPOINT": srv.URL, "AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey,
	})
	uri := "s3://" + s3test.NewBucketName() + "/team/runs"
	code, out, stderr := runCLI(t, env, "demo", "--store", uri, "--run", "s3demo", "--iterations", "2", "--tasks", "2", "--group", "2", "--grade-tasks", "0")
	if code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"SYNTHETIC", "rollouts         8 rows in 2 files", "segments         8 rows in 4 files", "iteration 1:"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	code, out, stderr = runCLI(t, env, "export", "--store", uri, "--run", "s3demo", "--table", "train_steps")
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	if n := strings.Count(out, "\n"); n != 4 {
		t.Fatalf("export: %d lines, want 4", n)
	}
	// Write-once: the same run id cannot be written twice.
	code, _, stderr = runCLI(t, env, "demo", "--store", uri, "--run", "s3demo", "--iterations", "1", "--tasks", "1", "--group", "1", "--grade-tasks", "0")
	if code != 2 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("rerun: exit %d, stderr %q", code, stderr)
	}
}

// TestRolloutTrainOnS3 runs one `legorl rollout` (the Beam pipeline, groups
// of 2 from the bash agent) and one `legorl train` on its data against the
// test S3 server (make test-minio runs it on MinIO), then audits the run
// there: every table, manifest, claim and report goes through S3, and the
// recomputed logprobs agree with the recorded ones.
func TestRolloutTrainOnS3(t *testing.T) {
	srv := s3test.Endpoint(t)
	env := testEnv(map[string]string{
		"LEGORL_S3_ENDPOINT": srv.URL, "AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey,
	})
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if _, err := builtin.Generate(context.Background(), suite, builtin.Options{N: 1, Seed: 8, Languages: []string{"python"}}); err != nil {
		t.Fatal(err)
	}
	policy := testPolicy(t)
	self, _ := os.Executable()
	store := "s3://" + s3test.NewBucketName() + "/team/runs"
	code, stdout, stderr := runCLI(t, env, "rollout", "--tasks", suite, "--harness", "bash", "--policy", policy, "--group", "2",
		"--store", store, "--run", "s3rl", "--split", "sft,train", "--max-turns", "2", "--max-tokens", "16", "--agent", self)
	t.Logf("rollout on %s: %s", srv.Kind, strings.TrimSpace(stdout))
	if code != 0 {
		t.Fatalf("rollout: exit %d: %s", code, stderr)
	}
	ckpt := filepath.Join(dir, "v1")
	code, stdout, stderr = runCLI(t, env, "train", "--store", store, "--run", "s3rl", "--iteration", "0", "--policy", policy, "--out", ckpt)
	t.Logf("train on %s: %s", srv.Kind, strings.TrimSpace(stdout))
	if code != 0 || !strings.Contains(stdout, "policy v0 -> v1") {
		t.Fatalf("train: exit %d: %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, env, "export", "--store", store, "--run", "s3rl", "--table", "train_steps")
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, `"run_id":"s3rl"`) {
		t.Fatalf("export train_steps: exit %d: %q %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, env, "audit", "--store", store, "--run", "s3rl", "--checkpoints", policy+","+ckpt)
	if code != 0 || !strings.Contains(stdout, "every check passed") || !strings.Contains(stdout, "ok   logprobs   iteration 0, version 0") {
		t.Fatalf("audit: exit %d: %s %s", code, stdout, stderr)
	}
}

// TestDemoGradesRealTasks runs the demo's second part: built-in tasks graded
// in local sandboxes, gold patches earning 1 and empty diffs 0.
func TestDemoGradesRealTasks(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runCLI(t, testEnv(nil), "demo", "--store", "file://"+dir, "--run", "g", "--iterations", "1", "--tasks", "1", "--group", "1", "--grade-tasks", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"part 2: real tasks graded in real sandboxes", "gold patches earned 2/2, empty diffs 0/2"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}
