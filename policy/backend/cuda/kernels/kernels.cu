// kernels.cu: the device code of the CUDA backend (policy/backend/cuda).
//
// `make ptx` compiles this file to kernels.ptx with Debian's clang-14
// (scripts/cuda/ptx.sh: -x cuda --cuda-device-only --cuda-gpu-arch=sm_80
// -nocudainc -nocudalib), so neither nvcc nor the CUDA headers are needed;
// the driver JIT-compiles the sm_80 PTX for the GPU it runs on. Without the
// CUDA headers and libdevice there is no math library: the few functions
// needed (exp, log in double precision) are written out below, and the
// attributes and builtins the CUDA headers would define come from clang.
//
// Conventions, relied on by the Go side (launch in policy/backend/cuda):
//   - every kernel is extern "C" and every parameter is 8 bytes: a pointer,
//     an i64 or a double (float scalars travel as double), because
//     gorgonia.org/cu's Launch copies 8 bytes per argument;
//   - every matrix is row-major, as in policy/backend;
//   - kernels that reduce over a row run one block of RT threads per row
//     and reduce in a fixed tree, so results are deterministic; there are
//     no atomics;
//   - the arithmetic follows the CPU backend (policy/backend/cpu.go): where
//     it accumulates in float64 these kernels do too, so fp32 results agree
//     to a few float32 ulps.

#include <__clang_cuda_builtin_vars.h>

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define KERNEL extern "C" __global__

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

// RT is the block size of the row kernels (kernels.RowThreads in Go).
#define RT 256
// MAXHD is the largest head dimension of the attention kernels
// (kernels.MaxHeadDim in Go).
#define MAXHD 256

// ---- math -----------------------------------------------------------------

static __device__ double inf_d() { return __builtin_inf(); }

// pow2 returns 2^k for -1022 <= k <= 1023.
static __device__ double pow2(int k) { return __builtin_bit_cast(double, (u64)(k + 1023) << 52); }

// exp_d is e^x in double precision, within about 1 ulp: x = k ln2 + r with
// |r| <= ln2/2 (ln2 split in a high part with trailing zero bits and a low
// part, as in fdlibm), e^r by its Taylor series to degree 13 (the next term
// is below 1e-17), and the scale by 2^k in two exact steps.
static __device__ double exp_d(double x) {
	if (x != x) {
		return x;
	}
	if (x > 709.782712893384) {
		return inf_d();
	}
	if (x < -745.1332191019412) {
		return 0.0;
	}
	double kd = __builtin_rint(x * 1.4426950408889634);
	int k = (int)kd;
	double r = (x - kd * 6.93147180369123816490e-01) - kd * 1.90821492927058770002e-10;
	double p = 1.0 / 6227020800.0;
	p = p * r + 1.0 / 479001600.0;
	p = p * r + 1.0 / 39916800.0;
	p = p * r + 1.0 / 3628800.0;
	p = p * r + 1.0 / 362880.0;
	p = p * r + 1.0 / 40320.0;
	p = p * r + 1.0 / 5040.0;
	p = p * r + 1.0 / 720.0;
	p = p * r + 1.0 / 120.0;
	p = p * r + 1.0 / 24.0;
	p = p * r + 1.0 / 6.0;
	p = p * r + 0.5;
	p = p * r + 1.0;
	p = p * r + 1.0;
	int k1 = k / 2;
	p *= pow2(k1);
	return p * pow2(k - k1);
}

// log_d is the natural logarithm in double precision, within a few ulps:
// x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(f) with
// f = (m-1)/(m+1), |f| < 0.172, by its series to f^23.
static __device__ double log_d(double x) {
	if (!(x > 0.0)) {
		return x == 0.0 ? -inf_d() : __builtin_nan("");
	}
	if (x == inf_d()) {
		return x;
	}
	u64 b = __builtin_bit_cast(u64, x);
	int e = (int)((b >> 52) & 0x7ff);
	if (e == 0) { // subnormal
		x *= 18014398509481984.0; // 2^54
		b = __builtin_bit_cast(u64, x);
		e = (int)((b >> 52) & 0x7ff) - 54;
	}
	e -= 1023;
	double m = __builtin_bit_cast(double, (b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e += 1;
	}
	double f = (m - 1.0) / (m + 1.0);
	double s = f * f;
	double t = 1.0 / 23.0;
	t = t * s + 1.0 / 21.0;
	t = t * s + 1.0 / 19.0;
	t = t * s + 1.0 / 17.0;
	t = t * s + 1.0 / 15.0;
	t = t * s + 1.0 / 13.0;
	t = t * s + 1.0 / 11.0;
	t = t * s + 1.0 / 9.0;
	t = t * s + 1.0 / 7.0;
	t = t * s + 1.0 / 5.0;
	t = t * s + 1.0 / 3.0;
	t *= s;
	double lm = 2.0 * f + 2.0 * f * t;
	double ed = (double)e;
	return ed * 6.93147180369123816490e-01 + (lm + ed * 1.90821492927058770002e-10);
}

// sigmoid is float32(1 / (1 + e^-x)) computed in double, as the CPU's.
static __device__ float sigmoid(float x) { return (float)(1.0 / (1.0 + exp_d(-(double)x))); }

// ---- block reductions (blockDim.x == RT) ----------------------------------

static __device__ double block_sum_d(double v, double* sh) {
	int t = threadIdx.x;
	sh[t] = v;
	__syncthreads();
	for (int s = RT / 2; s > 0; s >>= 1) {
		if (t < s) {
			sh[t] += sh[t + s];
		}
		__syncthreads();
	}
	double r = sh[0];
	__syncthreads();
	return r;
}

static __device__ double block_max_d(double v, double* sh) {
	int t = threadIdx.x;
	sh[t] = v;
	__syncthreads();
	for (int s = RT / 2; s > 0; s >>= 1) {
		if (t < s && sh[t + s] > sh[t]) {
			sh[t] = sh[t + s];
		}
		__syncthreads();
	}
	double r = sh[0];
	__syncthreads();
	return r;
}

// ---- matrix products ------------------------------------------------------

#define BM 64
#define BN 64
#define BK 16

// sgemm computes C = alpha*op(A)*op(B) + beta*C (row-major, the BLAS
// contract of backend.Ops.Gemm) for op(A) [M,K], op(B) [K,N]; C is not read
// when beta == 0. Blocks of 256 threads compute 64x64 tiles of C, each
// thread a 4x4 grid of elements strided by 16; grid (ceil(N/64),
// ceil(M/64)). Every element is one float accumulation over k = 0..K-1 in
// order, whatever the tile, so a row of C depends only on its row of op(A):
// the kernel also serves RowLinear.
KERNEL void sgemm(i64 transA, i64 transB, i64 M_, i64 N_, i64 K_, double alpha_, const float* A, i64 lda, const float* B,
                  i64 ldb, double beta_, float* C, i64 ldc) {
	__shared__ float As[BK][BM + 1];
	__shared__ float Bs[BK][BN + 1];
	const int M = (int)M_, N = (int)N_, K = (int)K_;
	const int t = threadIdx.x, tx = t % 16, ty = t / 16;
	const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
	float acc[4][4];
	for (int i = 0; i < 4; i++) {
		for (int j = 0; j < 4; j++) {
			acc[i][j] = 0.0f;
		}
	}
	for (int k0 = 0; k0 < K; k0 += BK) {
		// As[kk][i] = op(A)[row0+i][k0+kk], loaded along A's contiguous axis.
		for (int r = 0; r < 4; r++) {
			int i, kk;
			if (!transA) {
				i = t / 16 + 16 * r;
				kk = t % 16;
			} else {
				kk = t / 64 + 4 * r;
				i = t % 64;
			}
			int gi = row0 + i, gk = k0 + kk;
			float a = 0.0f;
			if (gi < M && gk < K) {
				a = transA ? A[(i64)gk * lda + gi] : A[(i64)gi * lda + gk];
			}
			As[kk][i] = a;
		}
		// Bs[kk][j] = op(B)[k0+kk][col0+j].
		for (int r = 0; r < 4; r++) {
			int j, kk;
			if (!transB) {
				kk = t / 64 + 4 * r;
				j = t % 64;
			} else {
				j = t / 16 + 16 * r;
				kk = t % 16;
			}
			int gj = col0 + j, gk = k0 + kk;
			float b = 0.0f;
			if (gj < N && gk < K) {
				b = transB ? B[(i64)gj * ldb + gk] : B[(i64)gk * ldb + gj];
			}
			Bs[kk][j] = b;
		}
		__syncthreads();
		for (int kk = 0; kk < BK; kk++) {
			float a[4], b[4];
			for (int i = 0; i < 4; i++) {
				a[i] = As[kk][ty + 16 * i];
			}
			for (int j = 0; j < 4; j++) {
				b[j] = Bs[kk][tx + 16 * j];
			}
			for (int i = 0; i < 4; i++) {
				for (int j = 0; j < 4; j++) {
					acc[i][j] += a[i] * b[j];
				}
			}
		}
		__syncthreads();
	}
	const float alpha = (float)alpha_, beta = (float)beta_;
	for (int i = 0; i < 4; i++) {
		int gi = row0 + ty + 16 * i;
		if (gi >= M) {
			continue;
		}
		for (int j = 0; j < 4; j++) {
			int gj = col0 + tx + 16 * j;
			if (gj >= N) {
				continue;
			}
			float* c = C + (i64)gi * ldc + gj;
			float v = alpha * acc[i][j];
			if (beta != 0.0f) {
				v += beta * *c;
			}
			*c = v;
		}
	}
}

// f32_to_bf16 rounds n floats to bfloat16 (round to nearest even, NaNs
// kept quiet), the inputs of the bf16 cuBLAS products; one thread each.
KERNEL void f32_to_bf16(u16* dst, const float* src, i64 n) {
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) {
		return;
	}
	u32 u = __builtin_bit_cast(u32, src[i]);
	if ((u & 0x7fffffffu) > 0x7f800000u) {
		dst[i] = (u16)((u >> 16) | 0x40u);
		return;
	}
	dst[i] = (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// ---- RMSNorm ----------------------------------------------------------------

// rmsnorm_fwd sets y[i,:] = w * x[i,:] * r[i], r[i] = 1/sqrt(mean(x[i,:]^2)
// + eps), the sum of squares in double; r may be null. One block per row.
KERNEL void rmsnorm_fwd(float* y, float* r, const float* x, const float* w, i64 n_, double eps) {
	__shared__ double red[RT];
	const int n = (int)n_;
	const i64 row = blockIdx.x;
	const float* xr = x + row * n;
	float* yr = y + row * n;
	double ss = 0.0;
	for (int j = threadIdx.x; j < n; j += RT) {
		double v = xr[j];
		ss += v * v;
	}
	ss = block_sum_d(ss, red);
	const float ri = (float)(1.0 / __builtin_sqrt(ss / (double)n + eps));
	if (r != 0 && threadIdx.x == 0) {
		r[row] = ri;
	}
	for (int j = threadIdx.x; j < n; j += RT) {
		yr[j] = w[j] * (xr[j] * ri);
	}
}

// rmsnorm_bwd_dx adds to dx the input gradient of RMSNorm:
// dx += dy*w*r - x*c with c = r^3/n * sum(dy*w*x), the sum in double. One
// block per row.
KERNEL void rmsnorm_bwd_dx(float* dx, const float* dy, const float* x, const float* w, const float* r, i64 n_) {
	__shared__ double red[RT];
	const int n = (int)n_;
	const i64 row = blockIdx.x;
	const float* xr = x + row * n;
	const float* dyr = dy + row * n;
	float* dxr = dx + row * n;
	double dot = 0.0;
	for (int j = threadIdx.x; j < n; j += RT) {
		float g = dyr[j] * w[j];
		dot += (double)g * (double)xr[j];
	}
	dot = block_sum_d(dot, red);
	const float ri = r[row];
	const float c = (float)dot * ri * ri * ri / (float)n;
	for (int j = threadIdx.x; j < n; j += RT) {
		dxr[j] += dyr[j] * w[j] * ri - xr[j] * c;
	}
}

// rmsnorm_bwd_dw_part sums dy*x*r over a chunk of rows for each column, in
// row order and double precision, into part[chunk, n]: grid
// (ceil(n/RT), chunks), the first pass of the deterministic dw reduction.
KERNEL void rmsnorm_bwd_dw_part(double* part, const float* dy, const float* x, const float* r, i64 rows_, i64 n_,
                                i64 chunk_) {
	const int n = (int)n_;
	const i64 rows = rows_, chunk = chunk_;
	const int j = blockIdx.x * RT + threadIdx.x;
	if (j >= n) {
		return;
	}
	const i64 c = blockIdx.y;
	const i64 i1 = (c + 1) * chunk < rows ? (c + 1) * chunk : rows;
	double s = 0.0;
	for (i64 i = c * chunk; i < i1; i++) {
		float tm = dy[i * n + j] * x[i * n + j] * r[i];
		s += (double)tm;
	}
	part[c * n + j] = s;
}

// rmsnorm_bwd_dw_sum adds the chunk sums of rmsnorm_bwd_dw_part to dw, in
// chunk order: dw[j] = float(dw[j] + sum_c part[c, j]). One thread a column.
KERNEL void rmsnorm_bwd_dw_sum(float* dw, const double* part, i64 n_, i64 chunks_) {
	const int n = (int)n_;
	const i64 chunks = chunks_;
	const int j = blockIdx.x * RT + threadIdx.x;
	if (j >= n) {
		return;
	}
	double s = 0.0;
	for (i64 c = 0; c < chunks; c++) {
		s += part[c * n + j];
	}
	dw[j] = (float)((double)dw[j] + s);
}

// ---- SwiGLU -----------------------------------------------------------------

// swiglu_fwd sets act = silu(g) * u, one thread per element.
KERNEL void swiglu_fwd(float* act, const float* g, const float* u, i64 n) {
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) {
		return;
	}
	float gv = g[i];
	float s = sigmoid(gv);
	act[i] = s * (gv * u[i]);
}

// swiglu_bwd sets dg and du from dact (du may be dact: each element is read
// before it is written by the same thread).
KERNEL void swiglu_bwd(float* dg, float* du, const float* dact, const float* g, const float* u, i64 n) {
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) {
		return;
	}
	float gv = g[i], uv = u[i], da = dact[i];
	float s = sigmoid(gv);
	dg[i] = da * uv * s * (1.0f + gv * (1.0f - s));
	du[i] = da * gv * s;
}

// ---- attention --------------------------------------------------------------

// attn_fwd is causal grouped-query attention for query rows row0 +
// blockIdx.x of head blockIdx.y: q [S, H*hd] at positions pos0.., k, v
// [pos0+S, KV*hd], out [S, H*hd]. The row's scores, then probabilities, go
// to P at ((h*pRows + i - pRow0) * (pos0+S)): the probs output [H][S][N]
// (pRows = S, pRow0 = 0) or a scratch buffer for a chunk of rows; entries
// past the causal limit are set to 0. Scores are float dot products in d
// order times scale, the softmax is shifted by the row max with its sum in
// double, and out = P V in key order, as on the CPU.
KERNEL void attn_fwd(float* out, float* P, const float* q, const float* k, const float* v, i64 S_, i64 pos0_, i64 H_,
                     i64 KV_, i64 hd_, i64 row0, i64 pRows, i64 pRow0, double scale_) {
	__shared__ double red[RT];
	__shared__ float qs[MAXHD];
	const int H = (int)H_, KV = (int)KV_, hd = (int)hd_;
	const i64 S = S_, pos0 = pos0_;
	const i64 N = pos0 + S;
	const i64 i = row0 + blockIdx.x;
	const int h = blockIdx.y;
	const int kh = h / (H / KV);
	const i64 last = pos0 + i;
	const float scale = (float)scale_;
	float* Pr = P + ((i64)h * pRows + (i - pRow0)) * N;
	const float* qi = q + (i * H + h) * hd;
	for (int d = threadIdx.x; d < hd; d += RT) {
		qs[d] = qi[d];
	}
	__syncthreads();
	double mx = -inf_d();
	for (i64 j = threadIdx.x; j <= last; j += RT) {
		const float* kj = k + (j * KV + kh) * hd;
		float acc = 0.0f;
		for (int d = 0; d < hd; d++) {
			acc += qs[d] * kj[d];
		}
		float s = scale * acc;
		Pr[j] = s;
		if ((double)s > mx) {
			mx = (double)s;
		}
	}
	mx = block_max_d(mx, red);
	double sum = 0.0;
	for (i64 j = threadIdx.x; j <= last; j += RT) {
		double e = exp_d((double)Pr[j] - mx);
		Pr[j] = (float)e;
		sum += e;
	}
	sum = block_sum_d(sum, red);
	const float inv = (float)(1.0 / sum);
	for (i64 j = threadIdx.x; j < N; j += RT) {
		Pr[j] = j <= last ? Pr[j] * inv : 0.0f;
	}
	__syncthreads();
	for (int d = threadIdx.x; d < hd; d += RT) {
		float acc = 0.0f;
		for (i64 j = 0; j <= last; j++) {
			acc += Pr[j] * v[(j * KV + kh) * hd + d];
		}
		out[(i * H + h) * hd + d] = acc;
	}
}

// attn_bwd_ds computes, for query row blockIdx.x of head blockIdx.y
// (Pos0 = 0, N = S), dP = dout V^T, the softmax gradient dS = P * (dP -
// sum(P*dP)) into dS [H][S][S] (zero above the diagonal) and dq = scale *
// dS K.
KERNEL void attn_bwd_ds(float* dS, float* dq, const float* dout, const float* k, const float* v, const float* P, i64 S_,
                        i64 H_, i64 KV_, i64 hd_, double scale_) {
	__shared__ double red[RT];
	__shared__ float dos[MAXHD];
	const int H = (int)H_, KV = (int)KV_, hd = (int)hd_;
	const i64 S = S_;
	const i64 i = blockIdx.x;
	const int h = blockIdx.y;
	const int kh = h / (H / KV);
	const float scale = (float)scale_;
	const float* Pr = P + ((i64)h * S + i) * S;
	float* dSr = dS + ((i64)h * S + i) * S;
	const float* doi = dout + (i * H + h) * hd;
	for (int d = threadIdx.x; d < hd; d += RT) {
		dos[d] = doi[d];
	}
	__syncthreads();
	double dot = 0.0;
	for (i64 j = threadIdx.x; j <= i; j += RT) {
		const float* vj = v + (j * KV + kh) * hd;
		float acc = 0.0f;
		for (int d = 0; d < hd; d++) {
			acc += dos[d] * vj[d];
		}
		dSr[j] = acc;
		dot += (double)(Pr[j] * acc);
	}
	dot = block_sum_d(dot, red);
	const float dotf = (float)dot;
	for (i64 j = threadIdx.x; j < S; j += RT) {
		dSr[j] = j <= i ? Pr[j] * (dSr[j] - dotf) : 0.0f;
	}
	__syncthreads();
	for (int d = threadIdx.x; d < hd; d += RT) {
		float acc = 0.0f;
		for (i64 j = 0; j <= i; j++) {
			acc += dSr[j] * k[(j * KV + kh) * hd + d];
		}
		dq[(i * H + h) * hd + d] = scale * acc;
	}
}

// attn_bwd_dkv sets, for key row blockIdx.x of key/value head blockIdx.y,
// dk = sum over the group's heads of scale * dS^T Q and dv = sum of P^T
// dout, the heads added in order as on the CPU. Any block size; threads
// stride over d.
KERNEL void attn_bwd_dkv(float* dk, float* dv, const float* dS, const float* P, const float* dout, const float* q, i64 S_,
                         i64 H_, i64 KV_, i64 hd_, double scale_) {
	const int H = (int)H_, KV = (int)KV_, hd = (int)hd_;
	const i64 S = S_;
	const i64 j = blockIdx.x;
	const int kh = blockIdx.y;
	const int group = H / KV;
	const float scale = (float)scale_;
	for (int d = threadIdx.x; d < hd; d += blockDim.x) {
		float dkv = 0.0f, dvv = 0.0f;
		for (int h = kh * group; h < (kh + 1) * group; h++) {
			float a = 0.0f, b = 0.0f;
			for (i64 i = j; i < S; i++) {
				i64 pij = ((i64)h * S + i) * S + j;
				i64 qd = (i * H + h) * hd + d;
				a += dS[pij] * q[qd];
				b += P[pij] * dout[qd];
			}
			dkv += scale * a;
			dvv += b;
		}
		dk[(j * KV + kh) * hd + d] = dkv;
		dv[(j * KV + kh) * hd + d] = dvv;
	}
}

// ---- logprobs ---------------------------------------------------------------

// logprobs_fwd sets lp[i] = log softmax(z[i,:]*invT)[target[i]] for row
// blockIdx.x of z [rows, V], max and sum in double. With keep it leaves the
// softmax in z; otherwise z is left unchanged.
KERNEL void logprobs_fwd(float* lp, float* z, const int* targets, i64 V_, double invT, i64 keep) {
	__shared__ double red[RT];
	const i64 V = V_;
	const i64 row = blockIdx.x;
	float* zr = z + row * V;
	const double zt = (double)zr[targets[row]] * invT;
	double mx = -inf_d();
	for (i64 j = threadIdx.x; j < V; j += RT) {
		double s = (double)zr[j] * invT;
		if (s > mx) {
			mx = s;
		}
	}
	mx = block_max_d(mx, red);
	double sum = 0.0;
	for (i64 j = threadIdx.x; j < V; j += RT) {
		double e = exp_d((double)zr[j] * invT - mx);
		if (keep) {
			zr[j] = (float)e;
		}
		sum += e;
	}
	sum = block_sum_d(sum, red);
	if (threadIdx.x == 0) {
		lp[row] = (float)(zt - mx - log_d(sum));
	}
	if (keep) {
		const float inv = (float)(1.0 / sum);
		for (i64 j = threadIdx.x; j < V; j += RT) {
			zr[j] *= inv;
		}
	}
}

// logprobs_bwd turns the softmax probs [rows, V] into d loss / d logits in
// place: p*(-wt) plus wt at the target, wt = float(w[i] / temp); grid
// (rows, ceil(V/RT)).
KERNEL void logprobs_bwd(float* p, const int* targets, const float* w, i64 V_, double temp) {
	const i64 V = V_;
	const i64 row = blockIdx.x;
	const i64 j = (i64)blockIdx.y * RT + threadIdx.x;
	if (j >= V) {
		return;
	}
	const float wt = (float)((double)w[row] / temp);
	float* pr = p + row * V;
	float x = pr[j] * -wt;
	if (j == (i64)targets[row]) {
		x += wt;
	}
	pr[j] = x;
}

// ---- optimizer --------------------------------------------------------------

// adamw applies one AdamW step to n elements in double precision, as the
// CPU backend: g is scaled by gradScale first (and written back when it is
// not 1), the moments are updated and stored as float, and p = p*shrink -
// stepSize*m/(sqrt(v)/sqrtBC2 + eps) from the unrounded moments.
KERNEL void adamw(float* p, float* g, float* m, float* v, i64 n, double b1, double b2, double eps, double stepSize,
                  double sqrtBC2, double shrink_, double gradScale) {
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) {
		return;
	}
	double gi = (double)g[i] * gradScale;
	if (gradScale != 1.0) {
		g[i] = (float)gi;
	}
	double mi = b1 * (double)m[i] + (1.0 - b1) * gi;
	double vi = b2 * (double)v[i] + (1.0 - b2) * gi * gi;
	m[i] = (float)mi;
	v[i] = (float)vi;
	float ws = p[i] * (float)shrink_;
	p[i] = (float)((double)ws - stepSize * mi / (__builtin_sqrt(vi) / sqrtBC2 + eps));
}
