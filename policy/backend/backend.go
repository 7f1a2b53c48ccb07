// Package backend defines the compute operations the policy model runs on
// (matrix products, attention, norms, activations, softmax and logprobs,
// the optimizer step) and a registry of implementations.
//
// The pure-Go CPU backend (CPU) is the default and is always present. Other
// backends register themselves by name from an init function, the way
// database/sql drivers do, so a program opts into one with a blank import
// and a build tag and the default build never needs their toolchains:
//
//	import _ "github.com/legorl/legorl/policy/backend/cuda" // go build -tags cuda
//
// All operations take and return host memory (row-major float32 slices): the
// model keeps its weights, activations and KV caches on the host and a device
// backend copies what each operation needs. That keeps one model code path
// and one checkpoint format for every backend, at the cost of a host round
// trip per operation on a device.
package backend

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Float is the element type of the operations: float32 for every model,
// float64 for the CPU reference the gradient checks use.
type Float interface{ ~float32 | ~float64 }

// AttnShape describes one causal grouped-query attention call: S query rows
// at positions Pos0..Pos0+S-1 over Pos0+S keys and values.
type AttnShape struct {
	S, Pos0   int // query rows and the position of the first
	Heads, KV int // query heads and key/value heads (Heads % KV == 0)
	HeadDim   int
	Block     int // row block of the causal products (CPU: skips the masked triangle)
}

// Ops are the model's operations on slices of T. Every slice is row-major;
// outputs are written, never appended to, and must not alias inputs unless
// a method says so. Methods may be called concurrently.
type Ops[T Float] interface {
	// Gemm computes C = alpha*op(A)*op(B) + beta*C, op(X) = X or X^T, with
	// op(A) [m,k], op(B) [k,n], C [m,n] and leading dimensions lda, ldb, ldc
	// (the BLAS contract, row-major).
	Gemm(transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)
	// RowLinear sets y [rows,out] = x [rows,in] W^T for W [out,in], each
	// row of y computed from its own row of x in a fixed order, so a row's
	// result does not depend on the other rows (the engine's batched decode
	// relies on this to make a token's logits independent of its batch).
	RowLinear(y, x []T, rows, in int, w []T, out int)
	// RMSNorm sets y[i,:] = w * x[i,:] * r[i] with r[i] = 1/sqrt(mean(x[i,:]^2) + eps)
	// for x [rows,n]; r may be nil when the caller does not need it.
	RMSNorm(y, r, x []T, rows, n int, w []T, eps float64)
	// RMSNormBack adds to dx [rows,n] and dw [n] the gradient of RMSNorm
	// given dy, the forward input x and its roots r.
	RMSNormBack(dx, dw, dy, x []T, rows, n int, w, r []T)
	// SwiGLU sets act[i] = silu(g[i]) * u[i].
	SwiGLU(act, g, u []T)
	// SwiGLUBack sets dg and du from dact, the gradient of act. du may
	// alias dact.
	SwiGLUBack(dg, du, dact, g, u []T)
	// Attention runs causal attention of q [S, Heads*HeadDim] over k, v
	// [Pos0+S, KV*HeadDim] (scaled by 1/sqrt(HeadDim)) into out [S,
	// Heads*HeadDim]. probs, when not nil, receives the probabilities
	// [Heads][S][Pos0+S] (training: Pos0 = 0, or the tokens after a shared
	// prefix), zero above the diagonal.
	Attention(out, probs, q, k, v []T, a AttnShape)
	// AttendRows is the decoding engine's attention: nq query rows of one
	// head, q [nq rows ld apart, hd each] at positions first..first+nq-1,
	// over the keys and values k, v [positions, ldkv apart, hd each] in
	// position order, into out (rows ld apart), scaled by 1/sqrt(hd). Each
	// row's result is the bits it gets alone, whatever nq and first are:
	// a token's logits must not depend on the batch or chunk it is decoded
	// in (the engine's batch invariance rests on it).
	AttendRows(out, q []T, ld, nq int, k, v []T, ldkv, first, hd int)
	// AttentionBack sets dq [S, Heads*HeadDim] and dk, dv [S, KV*HeadDim]
	// from dout and the forward inputs and probabilities (Pos0 = 0; the
	// model composes the Pos0 > 0 case of a shared prefix from Gemm).
	AttentionBack(dq, dk, dv, dout, q, k, v, probs []T, a AttnShape)
	// Logprobs sets lp[i] = log softmax(logits[i,:]*invTemp)[targets[i]] for
	// logits [len(targets), vocab]. With keepProbs it leaves the softmax in
	// logits (for LogprobsBack); otherwise logits is scratch.
	Logprobs(lp, logits []T, vocab int, targets []int32, invTemp float64, keepProbs bool)
	// LogprobsBack turns the softmax probs [len(targets), vocab] left by
	// Logprobs into d loss / d logits in place, for the loss sum_i w[i] *
	// lp[i]: w[i]/temp * (1[j = target] - probs[i,j]).
	LogprobsBack(probs []T, vocab int, targets []int32, w []float32, temp float64)
}

// AdamWStep is one decoupled-weight-decay Adam update of a tensor, as
// torch.optim.AdamW after bias correction: the caller computes StepSize =
// lr / (1 - beta1^t) and SqrtBC2 = sqrt(1 - beta2^t).
type AdamWStep struct {
	Beta1, Beta2 float64
	Eps          float64
	StepSize     float64
	SqrtBC2      float64
	Shrink       float32 // 1 - lr*weight decay; 1 for tensors without decay
	GradScale    float64 // global-norm clip factor applied to g first (g is rescaled in place when != 1)
}

// Backend is a complete set of float32 operations plus the optimizer step
// and the backend's life cycle.
type Backend interface {
	Ops[float32]
	// Name is the name the backend registered under.
	Name() string
	// AdamW applies one AdamW step to the tensor p with gradient g and
	// moments m, v (all the same length), in place.
	AdamW(p, g, m, v []float32, s AdamWStep)
	// Err returns the first error an operation hit, or nil. Operations do
	// not return errors (a device failure is sticky, as in CUDA): callers
	// check Err after a pass and discard its results when it is not nil.
	Err() error
	// Close releases the backend's resources. It is safe to call twice.
	Close() error
}

// Options configure Open.
type Options struct {
	// Device is the index of the accelerator to use (ignored by the CPU).
	Device int
	// Precision of the matrix products: "fp32" (the default) or "bf16"
	// (inputs rounded to bfloat16, float32 accumulation; on the CPU,
	// CPUBF16).
	Precision string
}

// Factory opens a backend.
type Factory func(Options) (Backend, error)

var (
	mu        sync.Mutex
	factories = map[string]Factory{}
)

// Register makes a backend available to Open under name. It is meant for
// init functions and panics if name is empty or taken.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if name == "" || f == nil {
		panic("backend: Register with an empty name or nil factory")
	}
	if _, dup := factories[name]; dup || name == "cpu" {
		panic("backend: Register called twice for " + name)
	}
	factories[name] = f
}

// Names returns the backends Open knows, sorted, "cpu" included.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	names := []string{"cpu"}
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open returns the backend registered as name; "" and "cpu" give the CPU
// backend.
func Open(name string, opt Options) (Backend, error) {
	switch opt.Precision {
	case "", "fp32", "bf16":
	default:
		return nil, fmt.Errorf("backend: unknown precision %q (want fp32 or bf16)", opt.Precision)
	}
	if name == "" || name == "cpu" {
		if opt.Precision == "bf16" {
			return NewCPUBF16(), nil
		}
		return NewCPU(), nil
	}
	mu.Lock()
	f := factories[name]
	mu.Unlock()
	if f == nil {
		hint := ""
		if name == "cuda" {
			hint = "; this binary was built without it: build with -tags cuda"
		}
		return nil, fmt.Errorf("backend: unknown backend %q (have %s)%s", name, strings.Join(Names(), ", "), hint)
	}
	b, err := f(opt)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	return b, nil
}
