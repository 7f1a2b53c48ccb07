package grade

// FastCounts returns how many of g's grades ran the fast runner and how
// many of those it declined.
func (g *Grader) FastCounts() (runs, declines int64) { return g.fastRuns.Load(), g.fastDeclines.Load() }
