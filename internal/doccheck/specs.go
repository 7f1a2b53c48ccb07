package doccheck

import (
	"regexp"
	"strings"
)

// replace makes a Ratio.Anchor that names a row's anchor by replacing old
// with new in the row's name (rows without old have none, nor has the
// anchor itself).
func replace(old, new string) func(string) string {
	return func(name string) string {
		if !strings.Contains(name, old) {
			return ""
		}
		return strings.Replace(name, old, new, 1)
	}
}

// fixed makes a Ratio.Anchor that gives every row matching rows (but the
// anchor) the one anchor.
func fixed(rows, anchor string) func(string) string {
	re := regexp.MustCompile(rows)
	return func(name string) string {
		if name == anchor || !re.MatchString(name) {
			return ""
		}
		return anchor
	}
}

// Tables are docs/PERFORMANCE.md's generated tables, one per component,
// in the page's order. Each Name is a `make bench-NAME` target.
var Tables = []Table{
	{
		Name: "storage",
		Columns: []Column{
			{"MB/s", []string{"MB/s"}},
			{"MB per CPU-second", []string{"MB/cpu-s"}},
			{"file MB", []string{"file-MB"}},
			{"peak RSS / payload", []string{"RSS/payload"}},
		},
		Ratios: []Ratio{{Head: "MB per CPU-second / arrow-go's", Unit: "MB/cpu-s", Anchor: func(name string) string {
			if strings.HasSuffix(name, "arrow-go-anchor") {
				return ""
			}
			i := strings.LastIndex(name, "/")
			return name[:i] + "/arrow-go-anchor"
		}}},
	},
	{
		Name: "sandbox",
		Columns: []Column{
			{"p50 ms", []string{"p50-ms"}},
			{"p99 ms", []string{"p99-ms"}},
			{"CPU ms per sandbox", []string{"cpu-ms/op"}},
		},
		Ratios: []Ratio{{Head: "p50 / bubblewrap's", Unit: "p50-ms", Anchor: fixed(`^BenchmarkLocal`, "BenchmarkAnchorBubblewrap")}},
	},
	{
		Name: "docker",
		Columns: []Column{
			{"p50 ms", []string{"p50-ms"}},
			{"p99 ms", []string{"p99-ms"}},
		},
		Ratios: []Ratio{{Head: "p50 / the anchor's", Unit: "p50-ms", Anchor: func(name string) string {
			return map[string]string{"BenchmarkCreateExecClose": "BenchmarkAnchorEngineRun", "BenchmarkExec": "BenchmarkAnchorHostExec"}[name]
		}}},
	},
	{
		Name: "grade",
		Columns: []Column{
			{"ms per grade", []string{"grade-ms/op", "fast-ms/grade"}},
			{"anchor ms", []string{"anchor-ms/op", "pytest-ms/grade"}},
			{"grade / bare run, or pytest / fast runner", []string{"grade/anchor", "pytest/fast"}},
		},
	},
	{
		Name: "tokenizer",
		Columns: []Column{
			{"MB/s", []string{"MB/s", "ref-MB/s"}},
			{"MB per CPU-second", []string{"cpu-MB/s", "ref-cpu-MB/s"}},
		},
		Ratios: []Ratio{{Head: "per CPU-second / node's", Unit: "cpu-MB/s", AnchorUnit: "ref-cpu-MB/s", Anchor: fixed(`^BenchmarkEncode/go`, "BenchmarkEncode/node")}},
	},
	{
		Name: "chat",
		Columns: []Column{
			{"ns/op", []string{"ns/op"}},
			{"allocs/op", []string{"allocs/op"}},
			{"Jinja / Go", []string{"jinja/go"}},
			{"parse / encoding/json", []string{"parse/json-decode"}},
		},
	},
	{
		Name: "sgemm",
		Rows: regexp.MustCompile(`^Benchmark(FMAPeak|MicroKernel|Sgemm/.*/legorl/threads=1$)`),
		Columns: []Column{
			{"GFLOP/s", []string{"GFLOP/s"}},
			{"GFLOP per CPU-second", []string{"GFLOP/cpu-s"}},
		},
		Ratios: []Ratio{
			{Head: "/ FMA peak", Unit: "GFLOP/cpu-s", Anchor: func(name string) string {
				if strings.HasPrefix(name, "BenchmarkSgemm/") && strings.HasSuffix(name, "/threads=1") {
					return "BenchmarkFMAPeak"
				}
				return ""
			}},
			{Head: "/ OpenBLAS", Unit: "GFLOP/cpu-s", Anchor: replace("/legorl/", "/openblas/")},
			{Head: "/ PyTorch", Unit: "GFLOP/cpu-s", Anchor: replace("/legorl/", "/torch/")},
			{Head: "/ gonum", Unit: "GFLOP/cpu-s", Anchor: replace("/legorl/", "/gonum/")},
		},
	},
	{
		Name:    "train",
		Columns: []Column{{"tokens per CPU-second", []string{"tokens/cpu-s"}}},
		Ratios:  []Ratio{{Head: "Go / PyTorch", Unit: "tokens/cpu-s", Anchor: replace("/go", "/torch")}},
	},
	{
		Name: "engine",
		Columns: []Column{
			{"tokens/s", []string{"tokens/s"}},
			{"tokens per CPU-second", []string{"tokens/cpu-s"}},
			{"requests/s", []string{"requests/s"}},
			{"prompt tokens cached", []string{"cached-frac"}},
		},
		Ratios: []Ratio{{Head: "per CPU-second / `Cache.Extend`'s", Unit: "tokens/cpu-s", Anchor: func(name string) string {
			switch {
			case strings.Contains(name, "anchor"):
				return ""
			case strings.HasPrefix(name, "BenchmarkDecode/"):
				return "BenchmarkDecode/anchor=extend"
			case strings.HasPrefix(name, "BenchmarkPrefill/"):
				return name + "/anchor=extend"
			}
			return ""
		}}},
	},
	{
		Name: "proxy",
		Columns: []Column{
			{"p50 us", []string{"p50-us"}},
			{"p99 us", []string{"p99-us"}},
			{"allocs/op", []string{"allocs/op"}},
		},
		Ratios: []Ratio{{Head: "p50 minus the bare handler's, us", Unit: "p50-us", Anchor: fixed(`^BenchmarkCall/`, "BenchmarkCall/anchor"), Diff: true}},
	},
	{
		Name: "trainer",
		Rows: regexp.MustCompile(`^Benchmark(TrainStep|Recompute|ModelTrainStep|ModelLogprobs|Iteration|SFTStep)`),
		Columns: []Column{
			{"tokens/s (Iteration: training)", []string{"tokens/s", "train-tokens/s"}},
			{"tokens per CPU-second", []string{"tokens/cpu-s"}},
			{"Iteration: recompute tokens/s", []string{"recompute-tokens/s"}},
		},
		Ratios: []Ratio{{Head: "per CPU-second / the anchor's", Unit: "tokens/cpu-s", Anchor: func(name string) string {
			return map[string]string{
				"BenchmarkTrainStep":      "BenchmarkModelTrainStep",
				"BenchmarkTrainStepMoE":   "BenchmarkModelTrainStepMoE",
				"BenchmarkRecompute":      "BenchmarkModelLogprobs",
				"BenchmarkRecomputeMoE":   "BenchmarkModelLogprobsMoE",
				"BenchmarkSFTStep/shared": "BenchmarkSFTStep/unshared",
			}[name]
		}}},
	},
	{
		Name: "update",
		Columns: []Column{
			{"wall s", []string{"s/op"}},
			{"CPU s", []string{"cpu-s/op"}},
			{"train tokens/s", []string{"train-tokens/s"}},
			{"recompute tokens/s", []string{"recompute-tokens/s"}},
		},
		Ratios: []Ratio{{Head: "CPU s / the default's", Unit: "cpu-s/op", Anchor: replace("shared_prefix=true", "shared_prefix=false")}},
	},
	{
		Name:    "demos",
		Columns: []Column{{"demonstrations/s", []string{"demos/s"}}},
		Ratios:  []Ratio{{Head: "/ one at a time", Unit: "demos/s", Anchor: fixed(`parallel=`, "BenchmarkSolveAll/parallel=1")}},
	},
	{
		Name: "pipeline",
		Columns: []Column{
			{"rollouts/min", []string{"rollouts/min"}},
			{"s per rollout", []string{"s/rollout"}},
		},
		Ratios: []Ratio{{Head: "/ `rollout.Run` direct", Unit: "rollouts/min", Anchor: fixed(`^BenchmarkPipeline`, "BenchmarkDirect")}},
	},
	{
		Name: "loop",
		Columns: []Column{
			{"rollouts/min", []string{"rollouts/min"}},
			{"rollouts per CPU-minute", []string{"rollouts/cpu-min"}},
			{"setup s", []string{"setup-s/rollout"}},
			{"agent s", []string{"agent-s/rollout"}},
			{"grading s", []string{"grade-s/rollout"}},
		},
		Ratios: []Ratio{{Head: "/ the base's", Unit: "rollouts/min", Anchor: replace("/tree", "/base")}},
	},
	{
		Name: "cuda",
		Make: "make device-check",
		Columns: []Column{
			{"tokens/s", []string{"tokens/s"}},
			{"MFU %", []string{"MFU%"}},
			{"TFLOP/s", []string{"TFLOP/s"}},
		},
	},
}
