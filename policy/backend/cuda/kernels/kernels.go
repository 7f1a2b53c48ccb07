// Package kernels holds the device code of the CUDA backend: kernels.cu,
// the CUDA C source, and kernels.ptx, the PTX that `make ptx` compiles it
// to with clang-14 (scripts/cuda/ptx.sh). The PTX is embedded here so a
// cuda binary carries its kernels and loads them through the driver API
// (no nvcc, nvrtc or CUDA toolkit at run time).
//
// The package is tag-free and cgo-free: its tests, run by every `go test
// ./...`, check that kernels.ptx was regenerated after the last edit of
// kernels.cu and that it defines every kernel the Go side launches, with
// the number of parameters the Go side passes.
package kernels

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// PTX is the module source handed to cuModuleLoadData.
//
//go:embed kernels.ptx
var PTX string

// Launch geometry shared with kernels.cu.
const (
	// RowThreads is the block size of the kernels that reduce over a row
	// (RT in kernels.cu): norms, attention, logprobs.
	RowThreads = 256
	// GemmTile is the square tile of C one sgemm block computes, with
	// GemmThreads threads.
	GemmTile    = 64
	GemmThreads = 256
	// MaxHeadDim is the largest head dimension the attention kernels
	// support (MAXHD in kernels.cu).
	MaxHeadDim = 256
)

// Kernel names: the extern "C" entry points of kernels.cu.
const (
	Sgemm            = "sgemm"
	F32ToBF16        = "f32_to_bf16"
	RMSNormFwd       = "rmsnorm_fwd"
	RMSNormBwdDx     = "rmsnorm_bwd_dx"
	RMSNormBwdDwPart = "rmsnorm_bwd_dw_part"
	RMSNormBwdDwSum  = "rmsnorm_bwd_dw_sum"
	SwiGLUFwd        = "swiglu_fwd"
	SwiGLUBwd        = "swiglu_bwd"
	AttnFwd          = "attn_fwd"
	AttnBwdDS        = "attn_bwd_ds"
	AttnBwdDKV       = "attn_bwd_dkv"
	LogprobsFwd      = "logprobs_fwd"
	LogprobsBwd      = "logprobs_bwd"
	AdamW            = "adamw"
)

// Params maps every kernel to its number of parameters, each 8 bytes (a
// device pointer, an int64 or a float64). The Go side refuses a launch
// whose argument count differs.
var Params = map[string]int{
	Sgemm:            13,
	F32ToBF16:        3,
	RMSNormFwd:       6,
	RMSNormBwdDx:     6,
	RMSNormBwdDwPart: 7,
	RMSNormBwdDwSum:  4,
	SwiGLUFwd:        4,
	SwiGLUBwd:        6,
	AttnFwd:          14,
	AttnBwdDS:        11,
	AttnBwdDKV:       11,
	LogprobsFwd:      6,
	LogprobsBwd:      5,
	AdamW:            12,
}

// Names returns the kernel names in a fixed order.
func Names() []string {
	return []string{Sgemm, F32ToBF16, RMSNormFwd, RMSNormBwdDx, RMSNormBwdDwPart, RMSNormBwdDwSum,
		SwiGLUFwd, SwiGLUBwd, AttnFwd, AttnBwdDS, AttnBwdDKV, LogprobsFwd, LogprobsBwd, AdamW}
}

// header is the first line scripts/cuda/ptx.sh writes.
var header = regexp.MustCompile(`^// legorl: kernels\.cu sha256 ([0-9a-f]{64}),`)

// SourceSHA256 returns the sha256 of kernels.cu recorded in the first line
// of the PTX when it was generated.
func SourceSHA256() (string, error) {
	line, _, _ := strings.Cut(PTX, "\n")
	m := header.FindStringSubmatch(line)
	if m == nil {
		return "", fmt.Errorf("kernels: kernels.ptx lacks the header line of scripts/cuda/ptx.sh (got %.80q)", line)
	}
	return m[1], nil
}

// entry matches a kernel's declaration and its parameter list in the PTX.
var entry = regexp.MustCompile(`(?s)\.visible \.entry (\w+)\(\s*(.*?)\)`)

// Entries returns the kernels the PTX defines with the PTX types of their
// parameters (".u64", ".f64", ...).
func Entries() map[string][]string {
	out := map[string][]string{}
	for _, m := range entry.FindAllStringSubmatch(PTX, -1) {
		var types []string
		for _, p := range strings.Split(m[2], ",") {
			f := strings.Fields(p)
			if len(f) >= 2 && f[0] == ".param" {
				types = append(types, f[1])
			}
		}
		out[m[1]] = types
	}
	return out
}
