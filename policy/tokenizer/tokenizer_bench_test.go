package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/policy/internal/cputime"
)

// benchCorpus is the code corpus of the benchmarks: the Go files of the
// standard library's net/http package (about 1.9 MB; 71 files in Go 1.26).
func benchCorpus(b *testing.B) ([]string, int64) {
	b.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(goroot)), "src", "net", "http", "*.go"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no Go sources under GOROOT for the benchmark corpus (%v)", err)
	}
	var texts []string
	var n int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		texts = append(texts, string(data))
		n += int64(len(data))
	}
	return texts, n
}

// BenchmarkEncode measures encode throughput (MB/s of UTF-8 input) on the
// code corpus with Qwen3's tokenizer. "go" runs with a warm piece cache,
// "go-cold" empties the cache before each pass, and "node" is the anchor:
// the @lenml/tokenizers reference encoding the same texts in the same run
// (warm cache, reported as its own MB/s metric).
func BenchmarkEncode(b *testing.B) {
	tok := loadQwen3(b)
	texts, n := benchCorpus(b)
	b.Run("go", func(b *testing.B) {
		b.SetBytes(n)
		for _, s := range texts {
			tok.Encode(s)
		}
		cpu := cputime.Process()
		for b.Loop() {
			for _, s := range texts {
				tok.Encode(s)
			}
		}
		reportCPU(b, n*int64(b.N), cputime.Process()-cpu)
	})
	b.Run("go-cold", func(b *testing.B) {
		b.SetBytes(n)
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			tok.cache.mu.Lock()
			clear(tok.cache.m)
			tok.cache.mu.Unlock()
			b.StartTimer()
			start := cputime.Process()
			for _, s := range texts {
				tok.Encode(s)
			}
			cpu += cputime.Process() - start
		}
		reportCPU(b, n*int64(b.N), cpu)
	})
	b.Run("go-parallel", func(b *testing.B) {
		b.SetBytes(n)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for _, s := range texts {
					tok.Encode(s)
				}
			}
		})
	})
	b.Run("node", func(b *testing.B) {
		// One run of node (about 5 s of encoding, plus start-up and loading)
		// is one iteration; ref-MB/s is what node timed around its encode calls.
		var r nodeResult
		for b.Loop() {
			r = nodeBench(b, texts)
		}
		b.ReportMetric(r.MBPerS, "ref-MB/s")
		b.ReportMetric(r.CPUMBPerS, "ref-cpu-MB/s")
	})
}

type nodeResult struct {
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	MBPerS    float64 `json:"mb_per_s"`
	CPUMBPerS float64 `json:"cpu_mb_per_s"`
}

// reportCPU reports bytes per CPU second as cpu-MB/s.
func reportCPU(b *testing.B, bytes int64, cpu time.Duration) {
	if cpu > 0 {
		b.ReportMetric(float64(bytes)/1e6/cpu.Seconds(), "cpu-MB/s")
	}
}

// nodeBench runs the reference encoder for about 5 s on texts.
func nodeBench(b *testing.B, texts []string) nodeResult {
	b.Helper()
	needReference(b)
	in, err := json.Marshal(texts)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("node", "encode.mjs", "--bench", "5")
	cmd.Dir = refDir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("node encode.mjs --bench: %v: %s", err, stderr.String())
	}
	var r nodeResult
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("node encode.mjs --bench output %q: %v", out, err)
	}
	return r
}

func BenchmarkLoadQwen3(b *testing.B) {
	needReference(b)
	data, err := os.ReadFile(qwen3JSON)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	cpu := cputime.Process()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, int64(len(data))*int64(b.N), cputime.Process()-cpu)
}

// BenchmarkTrain trains a 4096-id tokenizer on the code corpus.
func BenchmarkTrain(b *testing.B) {
	texts, n := benchCorpus(b)
	b.SetBytes(n)
	cpu := cputime.Process()
	defer func() { reportCPU(b, n*int64(b.N), cputime.Process()-cpu) }()
	for b.Loop() {
		tr := NewTrainer(nil)
		for _, s := range texts {
			tr.Add(s)
		}
		if _, err := tr.Train(TrainOptions{VocabSize: 4096}); err != nil {
			b.Fatal(err)
		}
	}
}
