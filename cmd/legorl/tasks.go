package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/tasks"
	"github.com/legorl/legorl/tasks/builtin"
)

// runTasks dispatches `legorl tasks generate|validate`.
func runTasks(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(stdout, "usage: legorl tasks generate|validate [flags]   (legorl tasks SUB -h for its flags)")
		fmt.Fprintln(stdout, "\n  generate  write the built-in suite: small real repositories with one bug each")
		fmt.Fprintln(stdout, "  validate  check a suite: gold patch passes (repeated), base fails; prints a report")
		return nil
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("missing subcommand: generate or validate (see legorl tasks -h)")
	}
	switch args[0] {
	case "generate":
		return runTasksGenerate(ctx, args[1:], stdout, stderr)
	case "validate":
		return runTasksValidate(ctx, args[1:], stdout, stderr)
	default:
		return fmt.Errorf("unknown subcommand %q: want generate or validate", args[0])
	}
}

func runTasksGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tasks generate", stderr)
	suite := fs.String("suite", "builtin", "suite to generate: builtin")
	n := fs.Int("n", 20, "number of instances")
	seed := fs.Uint64("seed", 0, "seed: the suite is a pure function of --n and --seed")
	out := fs.String("out", "", "output folder: tasks.jsonl and repos/ (required)")
	langs := fs.String("languages", "python,python,go", "comma-separated languages to draw from, with repeats as weights: python, go")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *suite != "builtin" {
		return fmt.Errorf("unknown suite %q: want builtin", *suite)
	}
	if *out == "" {
		return fmt.Errorf("--out is required (see legorl tasks generate -h)")
	}
	if *n < 1 || *n > 100000 {
		return fmt.Errorf("--n must be between 1 and 100000")
	}
	ins, err := builtin.Generate(ctx, *out, builtin.Options{N: *n, Seed: *seed, Languages: strings.Split(*langs, ",")})
	if err != nil {
		return err
	}
	splits := map[string]int{}
	fams := map[string]int{}
	for _, in := range ins {
		splits[in.Split]++
		fams[in.Family]++
	}
	fmt.Fprintf(stdout, "legorl tasks generate: %d instances in %s/tasks.jsonl (sft %d, train %d, heldout %d, heldout_family %d; %d families)\n",
		len(ins), *out, splits["sft"], splits["train"], splits["heldout"], splits["heldout_family"], len(fams))
	return nil
}

func runTasksValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tasks validate", stderr)
	runs := fs.Int("runs", 3, "gold-patch runs per instance (repeats catch flaky tests)")
	jobs := fs.Int("jobs", 2, "instances validated at once")
	out := fs.String("out", "", "write the valid instances here as JSON lines (optional)")
	strict := fs.Bool("strict", false, "exit with status 2 when any instance is rejected")
	backend := fs.String("backend", "local", "sandbox backend: "+strings.Join(backendNames(), ", "))
	// PATH may come before or after the flags.
	var path string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		path, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stderr)
			return err
		}
		return fmt.Errorf("%v (see legorl tasks validate -h)", err)
	}
	if rest := fs.Args(); path == "" && len(rest) == 1 {
		path = rest[0]
	} else if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (see legorl tasks validate -h)", rest[0])
	}
	if path == "" {
		return fmt.Errorf("missing suite PATH: a .jsonl or .parquet file, or a folder with tasks.jsonl")
	}
	if *runs < 1 || *runs > 20 || *jobs < 1 || *jobs > 64 {
		return fmt.Errorf("--runs must be 1..20 and --jobs 1..64")
	}
	suite, err := tasks.Load(path)
	if err != nil {
		return err
	}
	b, err := openBackend(ctx, *backend)
	if err != nil {
		return err
	}
	g := grade.New(b, grade.Options{})
	start := time.Now()
	reports := g.ValidateSuite(ctx, suite, *runs, *jobs)
	if err := ctx.Err(); err != nil {
		return err
	}
	counts := map[string]int{}
	var valid []tasks.Instance
	for i, r := range reports {
		reason := tasks.Reason(r.Err)
		counts[reason]++
		if r.Err == nil {
			valid = append(valid, suite.Instances[i])
			fmt.Fprintf(stdout, "ok    %s\n", r.InstanceID)
		} else {
			fmt.Fprintf(stdout, "FAIL  %s  %s: %s\n", r.InstanceID, reason, oneLine(r.Err.Error()))
		}
	}
	reasons := make([]string, 0, len(counts))
	for k := range counts {
		if k != "ok" {
			reasons = append(reasons, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	sort.Strings(reasons)
	fmt.Fprintf(stdout, "total %d: ok %d, rejected %d", len(reports), counts["ok"], len(reports)-counts["ok"])
	if len(reasons) > 0 {
		fmt.Fprintf(stdout, " (%s)", strings.Join(reasons, ", "))
	}
	fmt.Fprintf(stdout, " in %.1fs\n", time.Since(start).Seconds())
	if *out != "" {
		for i := range valid {
			valid[i].Snapshot = valid[i].SnapshotDir(suite.Dir)
		}
		if err := writeOutput(*out, stdout, func(w io.Writer) error { return tasks.WriteJSONL(w, valid) }); err != nil {
			return err
		}
	}
	if *strict && counts["ok"] != len(reports) {
		return fmt.Errorf("%d of %d instances rejected", len(reports)-counts["ok"], len(reports))
	}
	return nil
}
