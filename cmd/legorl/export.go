package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/legorl/legorl/schemas"
	"github.com/legorl/legorl/storage"
	"github.com/legorl/legorl/storage/handoff"
)

func runExport(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stderr)
	var sf storeFlags
	sf.register(fs, env)
	run := fs.String("run", "", "run id (required)")
	table := fs.String("table", "", "table: rollouts, segments, steps or train_steps (required)")
	format := fs.String("format", "jsonl", "output format: jsonl or csv (of --table), or slime or verl (rollouts and segments for those trainers, into the folder --out)")
	out := fs.String("out", "-", "output file; - for stdout. A file is written whole or not at all")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *format == "slime" || *format == "verl" {
		return exportTrainer(ctx, env, sf, *run, handoff.Format(*format), *out, stderr)
	}
	if *run == "" || *table == "" {
		return fmt.Errorf("--run and --table are required (see legorl export -h)")
	}
	if !schemas.Table(*table).Valid() {
		return fmt.Errorf("unknown table %q: want rollouts, segments, steps or train_steps", *table)
	}
	if *format != "jsonl" && *format != "csv" {
		return fmt.Errorf("unknown format %q: want jsonl, csv, slime or verl", *format)
	}
	if err := storage.CheckName("run id", *run); err != nil {
		return err
	}
	st, err := sf.open(ctx, env, false)
	if err != nil {
		return err
	}
	files, err := storage.TableFiles(ctx, st, *run, *table)
	if err != nil {
		return err
	}
	var n int64
	err = writeOutput(*out, stdout, func(w io.Writer) (err error) {
		n, err = storage.Export(ctx, st, files, *format, w)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "legorl export: %d rows of %s from %d files of run %s in %s\n", n, *table, len(files), *run, st.URI())
	return nil
}

// writeOutput runs write against stdout, or against a temporary file that
// is renamed to path only when write succeeds.
func writeOutput(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "-" {
		bw := bufio.NewWriterSize(stdout, 1<<20)
		if err := write(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("output %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	return nil
}

// exportTrainer is `legorl export --format slime|verl`: a run's rollouts
// and segments in the layout of that trainer, one file per iteration in
// the folder out.
func exportTrainer(ctx context.Context, env *environ, sf storeFlags, run string, f handoff.Format, out string, stderr io.Writer) error {
	if run == "" || out == "-" || storage.CheckName("run id", run) != nil {
		return fmt.Errorf("--format %s needs --run RUN and --out FOLDER", f)
	}
	st, err := sf.open(ctx, env, false)
	if err != nil {
		return err
	}
	sum, err := handoff.Export(ctx, st, run, f, out)
	if err == nil {
		fmt.Fprintf(stderr, "legorl export: %d samples (%d of masked rollouts) of run %s in %d %s files in %s\n", sum.Samples, sum.Masked, run, sum.Files, f, out)
	}
	return err
}
