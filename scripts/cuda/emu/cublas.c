// A fake libcublas.so.13 for the emulator: column-major GemmEx of bf16 A, B
// into float C, float accumulation.
#include <stdint.h>
#include <string.h>
#include <stdio.h>
static float bf(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
int cublasCreate_v2(void** h) { *h = (void*)1; return 0; }
int cublasDestroy_v2(void* h) { return 0; }
const char* cublasGetStatusString(int s) { return "fake"; }
int cublasGemmEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int at, int lda,
	const void* B, int bt, int ldb, const void* beta, void* C, int ct, int ldc, int compute, int algo) {
	if (at != 14 || bt != 14 || ct != 0 || compute != 68) { fprintf(stderr, "fake cublas: types %d %d %d %d\n", at, bt, ct, compute); return 7; }
	if (lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m) { fprintf(stderr, "fake cublas: bad ld\n"); return 7; }
	const uint16_t* a = A; const uint16_t* b = B; float* c = C;
	float al = *(const float*)alpha, be = *(const float*)beta;
	for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) {
		float s = 0;
		for (int p = 0; p < k; p++) {
			float x = ta ? bf(a[i * lda + p]) : bf(a[p * lda + i]);   /* op(A)[i,p] col-major */
			float y = tb ? bf(b[p * ldb + j]) : bf(b[j * ldb + p]);   /* op(B)[p,j] */
			s += x * y;
		}
		float* cc = &c[j * ldc + i];
		*cc = be == 0 ? al * s : al * s + be * *cc;
	}
	return 0;
}
