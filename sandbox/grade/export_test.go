package grade

// FastCounts returns how many grades of this process ran the fast runner
// and how many of those it declined.
func FastCounts() (runs, declines int64) { return fastRuns.Load(), fastDeclines.Load() }
