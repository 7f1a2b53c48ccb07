package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestResultsScripts runs scripts/results/templates.py, edits.py and
// repeats.py, which make the by-template and repeated-task tables of
// docs/results, over a generated built-in
// suite and rollouts and steps tables written with the exporter's column
// names (the header lines of the export golden files). Each task gets one
// rollout of a known kind, so every count the scripts print is known.
func TestResultsScripts(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed for scripts/results: %v", err)
	}
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite")
	if code, _, stderr := runCLI(t, testEnv(nil), "tasks", "generate", "--n", "52", "--seed", "1", "--languages", "python", "--out", suite); code != 0 {
		t.Fatalf("tasks generate: exit %d: %s", code, stderr)
	}
	type task struct {
		ID, Template, Patch string
	}
	var tasks []task
	f, err := os.Open(filepath.Join(suite, "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var in struct {
			ID       string `json:"instance_id"`
			Template string `json:"template"`
			Patch    string `json:"patch"`
		}
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task{in.ID, in.Template, in.Patch})
	}
	fileRE := regexp.MustCompile(`(?m)^diff --git a/(\S+) b/`)

	// One rollout per task, of a kind by task index mod 4: 0 the fix on
	// the right file, applied and passed; 1 a view of the right file, then
	// the fix on a file of another name, failed; 2 no edit; 3 masked (an
	// infrastructure failure: not counted).
	header := func(table string) []string {
		b, err := os.ReadFile(filepath.Join("testdata", "export", table+".csv.golden"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.SplitN(string(b), "\n", 2)[0], ",")
	}
	rolloutCols, stepCols := header("rollouts"), header("steps")
	row := func(cols []string, v map[string]string) []string {
		r := make([]string, len(cols))
		for i, c := range cols {
			r[i] = v[c]
		}
		return r
	}
	var rollouts, steps [][]string
	type counts struct{ rollouts, other, file, fix int } // file: also applied and passed
	want := map[string]counts{}
	for i, tk := range tasks {
		kind := i % 4
		id := fmt.Sprintf("r%03d", i)
		status, reward := "completed", "0"
		if kind == 3 {
			status = "failed"
		}
		if kind == 0 {
			reward = "1"
		}
		rollouts = append(rollouts, row(rolloutCols, map[string]string{"run_id": "fix", "task_id": tk.ID, "rollout_id": id,
			"policy_version": "1", "status": status, "reward": reward}))
		var added []string
		for _, l := range strings.Split(tk.Patch, "\n") {
			if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++") && strings.TrimSpace(l[1:]) != "" {
				added = append(added, strings.TrimSpace(l[1:]))
			}
		}
		path := fileRE.FindStringSubmatch(tk.Patch)[1]
		if kind == 1 { // views the right file, edits another
			view, _ := json.Marshal(map[string]string{"path": path})
			steps = append(steps, row(stepCols, map[string]string{"run_id": "fix", "rollout_id": id, "turn": "0",
				"tool_name": "view_file", "arguments": string(view), "exit_code": "0"}))
			path = "other_" + path
		}
		args, _ := json.Marshal(map[string]string{"path": path, "old_str": "x", "new_str": strings.Join(added, "\n    ")})
		if kind <= 1 {
			steps = append(steps, row(stepCols, map[string]string{"run_id": "fix", "rollout_id": id, "turn": "1",
				"tool_name": "str_replace", "arguments": string(args), "exit_code": map[int]string{0: "0", 1: "1"}[kind]}))
		}
		w := want[tk.Template]
		if kind != 3 {
			w.rollouts++
		}
		if kind == 0 {
			w.file++
		}
		if kind == 1 {
			w.other++
		}
		if kind <= 1 {
			w.fix++ // the new text is the fix on either file
		}
		want[tk.Template] = w
	}
	write := func(name string, cols []string, rows [][]string) string {
		p := filepath.Join(dir, name)
		out, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		cw := csv.NewWriter(out)
		cw.Write(cols)
		cw.WriteAll(rows)
		if err := out.Close(); err != nil || cw.Error() != nil {
			t.Fatal(err, cw.Error())
		}
		return p
	}
	rp, sp := write("rollouts.csv", rolloutCols, rollouts), write("steps.csv", stepCols, steps)

	runPy := func(args ...string) string {
		out, err := exec.Command(python, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	edits := runPy("../../scripts/results/edits.py", filepath.Join(suite, "tasks.jsonl"), rp, sp)
	templ := runPy("../../scripts/results/templates.py", filepath.Join(suite, "tasks.jsonl"), rp)
	// A file that is not there: one line naming it, no traceback.
	missing := filepath.Join(dir, "missing.csv")
	for script, args := range map[string][]string{
		"edits.py":     {filepath.Join(suite, "tasks.jsonl"), missing, sp},
		"templates.py": {filepath.Join(suite, "tasks.jsonl"), missing},
		"repeats.py":   {missing},
	} {
		out, err := exec.Command(python, append([]string{"../../scripts/results/" + script}, args...)...).CombinedOutput()
		if err == nil || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), missing) {
			t.Errorf("%s with a missing table: %v, %q; want one line naming %s", script, err, out, missing)
		}
	}
	// repeats.py: iteration 0 rolls out a and b, 1 b and c, 2 a and c.
	var rl [][]string
	for i, ids := range [][]string{{"a", "b"}, {"b", "c"}, {"a", "c"}} {
		for _, id := range ids {
			for range 2 { // G = 2: a task's rollouts count once
				rl = append(rl, row(rolloutCols, map[string]string{"run_id": "rl", "iteration": strconv.Itoa(i), "task_id": id, "status": "completed", "reward": "0"}))
			}
		}
	}
	repeats := runPy("../../scripts/results/repeats.py", write("rl.csv", rolloutCols, rl))
	for _, line := range []string{"| 0 | 2 | 2 | 0 | 2 |\n", "| 1 | 2 | 1 | 1 | 3 |\n", "| 2 | 2 | 0 | 2 | 3 |\n"} {
		if !strings.Contains(repeats, line) {
			t.Errorf("repeats.py: no line %q in\n%s", line, repeats)
		}
	}
	if len(want) != 13 {
		t.Fatalf("%d templates in the suite, want 13", len(want))
	}
	for tmpl, w := range want {
		n := w.rollouts
		rate := func(k int) string { return fmt.Sprintf("%d (%.2f)", k, float64(k)/float64(n)) }
		// rollouts, viewed, other, other and viewed, file, applied, fix, passed
		line := fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %s | %s | %s |", tmpl, n,
			rate(w.other), rate(w.other), rate(w.other), rate(w.file), rate(w.file), rate(w.fix), rate(w.file))
		if !strings.Contains(edits, line+"\n") {
			t.Errorf("edits.py: no line %q in\n%s", line, edits)
		}
		if tl := fmt.Sprintf("| %s | %d/%d (%.2f) |\n", tmpl, w.file, n, float64(w.file)/float64(n)); !strings.Contains(templ, tl) {
			t.Errorf("templates.py: no line %q in\n%s", tl, templ)
		}
	}
}
