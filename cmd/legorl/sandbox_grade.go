package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/legorl/legorl/sandbox/grade"
	"github.com/legorl/legorl/tasks"
)

// runSandboxGrade is `legorl sandbox grade`: grade one diff against one
// task in a fresh local sandbox and print the grade as one JSON object.
func runSandboxGrade(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox grade", stderr)
	id := fs.String("task", "", "instance_id to grade (required)")
	path := fs.String("tasks", "", "suite: a .jsonl or .parquet file, or a folder with tasks.jsonl (required)")
	diffPath := fs.String("diff", "", "the agent's diff (a git-style unified diff); - for stdin; empty file: the base (required)")
	timeout := fs.Duration("timeout", 5*time.Minute, "deadline of the test command")
	backend := fs.String("backend", "local", "sandbox backend: "+strings.Join(backendNames(), ", "))
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *id == "" || *path == "" || *diffPath == "" {
		return fmt.Errorf("--task, --tasks and --diff are required (see legorl sandbox grade -h)")
	}
	suite, err := tasks.Load(*path)
	if err != nil {
		return err
	}
	inst, ok := suite.Find(*id)
	if !ok {
		return fmt.Errorf("task %q is not in %s", *id, *path)
	}
	var diff []byte
	if *diffPath == "-" {
		diff, err = io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
	} else {
		diff, err = os.ReadFile(*diffPath)
	}
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	b, err := openBackend(ctx, *backend)
	if err != nil {
		return err
	}
	g := grade.New(b, grade.Options{Timeout: *timeout})
	gr, err := g.Grade(ctx, suite.Dir, inst, string(diff))
	if err != nil {
		return err
	}
	out, err := json.Marshal(gr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return nil
}
