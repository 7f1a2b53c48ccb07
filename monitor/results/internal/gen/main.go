// Command gen writes docs/RESULTS.md's tables from the committed summaries
// (`make results`), or with -check fails when the committed tables differ
// from what it would write or when a cited document states a pass@1 or
// difference figure that no row holds (`make results-check`).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/legorl/legorl/monitor/results"
)

func main() {
	dir := flag.String("results", "docs/results", "the folder of the committed summaries and configs")
	doc := flag.String("doc", "docs/RESULTS.md", "the document whose marked section holds the tables")
	check := flag.Bool("check", false, "write nothing: fail when the document's tables are not what would be written")
	cite := flag.String("cite", "docs/RESULTS.md,README.md", "with -check: comma-separated documents whose pass@1 and difference figures must be rows of the tables")
	flag.Parse()
	if err := run(*dir, *doc, *check, *cite); err != nil {
		fmt.Fprintln(os.Stderr, "results:", err)
		os.Exit(1)
	}
}

func run(dir, doc string, check bool, cite string) error {
	runs, err := results.Load(os.DirFS(dir))
	if err != nil {
		return err
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(doc), dir)
	if err != nil {
		return err
	}
	out, err := results.Splice(string(old), results.Render(runs, filepath.ToSlash(rel)+"/"))
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	if !check {
		if out == string(old) {
			return nil
		}
		tmp := doc + ".tmp"
		if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, doc)
	}
	if out != string(old) {
		return fmt.Errorf("%s: its tables differ from the summaries in %s; run make results", doc, dir)
	}
	figs := results.Backing(runs)
	var bad []string
	for _, f := range strings.Split(cite, ",") {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, u := range figs.Unbacked(string(b)) {
			bad = append(bad, f+": "+u)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("figures no table row holds:\n%s", strings.Join(bad, "\n"))
	}
	return nil
}
