// Package doccheck keeps the Markdown docs honest, as tests: every relative
// link in a tracked *.md file resolves to a file (and, for a #fragment, to a
// heading of it), and the generated tables of docs/PERFORMANCE.md are what
// the committed benchmark outputs under docs/perf make. The tables are
// rewritten by `go test ./internal/doccheck -run TestPerformanceTables
// -update`, which bench/record.sh runs after each `make bench-NAME`.
package doccheck
