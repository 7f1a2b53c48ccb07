package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/legorl/legorl/loop"
)

// runCompare is `legorl compare` (loop.CompareEvals): the paired change of
// pass@1 between two stored evals of the same tasks, with the statistics
// a run reports; --out writes it as JSON too.
func runCompare(ctx context.Context, env *environ, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", stderr)
	var sf storeFlags
	sf.register(fs, env)
	before := fs.String("before", "", "the eval before, RUN@ITERATION, as legorl eval's --run and --iteration (required)")
	after := fs.String("after", "", "the eval after, RUN@ITERATION (required)")
	out := fs.String("out", "", "also write the comparison as JSON to this file, whole or not at all")
	if err := parseFlags(fs, stderr, args); err != nil {
		return err
	}
	if *before == "" || *after == "" {
		return errors.New("--before and --after are required (see legorl compare -h)")
	}
	st, err := sf.open(ctx, env, false)
	if err != nil {
		return err
	}
	c, notes, err := loop.CompareEvals(ctx, st, *before, *after)
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "legorl compare: %s\n", n)
	}
	c.WriteTable(stdout)
	if *out != "" {
		if err := writeOutput(*out, stdout, c.WriteJSON); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "legorl compare: %s (before) and %s (after) in %s\n", c.Before.Report, c.After.Report, st.URI())
	return nil
}
