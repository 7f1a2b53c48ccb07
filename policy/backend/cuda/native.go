//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <cuda.h>
#include <library_types.h>

// cuBLAS is opened with dlopen, so the binary does not pin the soname of
// one CUDA major version. Its enums are ints; the values are those of
// cublas_api.h (CUDA 12 and 13), whose C headers need libcu++'s <nv/target>
// and are therefore not included.
enum {
	legorl_CUBLAS_OP_N = 0,
	legorl_CUBLAS_OP_T = 1,
	legorl_CUBLAS_COMPUTE_32F = 68,
	legorl_CUBLAS_GEMM_DEFAULT = -1,
};

typedef void* legorl_handle;
typedef int (*legorl_create_fn)(legorl_handle*);
typedef int (*legorl_destroy_fn)(legorl_handle);
typedef int (*legorl_gemmex_fn)(legorl_handle, int, int, int, int, int, const void*, const void*, cudaDataType, int,
	const void*, cudaDataType, int, const void*, void*, cudaDataType, int, int, int);
typedef const char* (*legorl_status_fn)(int);

typedef struct {
	void* lib;
	legorl_create_fn create;
	legorl_destroy_fn destroy;
	legorl_gemmex_fn gemmEx;
	legorl_status_fn status;
	legorl_handle handle;
} legorl_cublas;

// legorl_cublas_open loads soname and its functions into c. It returns NULL
// or an error message (from dlerror, or naming the missing symbol).
static const char* legorl_cublas_open(legorl_cublas* c, const char* soname) {
	c->lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (c->lib == NULL) {
		return dlerror();
	}
	c->create = (legorl_create_fn)dlsym(c->lib, "cublasCreate_v2");
	c->destroy = (legorl_destroy_fn)dlsym(c->lib, "cublasDestroy_v2");
	c->gemmEx = (legorl_gemmex_fn)dlsym(c->lib, "cublasGemmEx");
	c->status = (legorl_status_fn)dlsym(c->lib, "cublasGetStatusString");
	const char* missing = NULL;
	if (c->create == NULL) {
		missing = "cublasCreate_v2 not found";
	} else if (c->destroy == NULL) {
		missing = "cublasDestroy_v2 not found";
	} else if (c->gemmEx == NULL) {
		missing = "cublasGemmEx not found";
	}
	if (missing != NULL) {
		dlclose(c->lib);
		c->lib = NULL;
	}
	return missing;
}

static int legorl_cublas_create(legorl_cublas* c) { return c->create(&c->handle); }

static int legorl_cublas_destroy(legorl_cublas* c) {
	int st = 0;
	if (c->handle != NULL) {
		st = c->destroy(c->handle);
		c->handle = NULL;
	}
	// The library stays loaded: unloading cuBLAS while the CUDA runtime
	// inside it may still hold state is not worth the risk.
	return st;
}

static const char* legorl_cublas_status(legorl_cublas* c, int st) {
	return c->status != NULL ? c->status(st) : NULL;
}

// legorl_gemm_bf16 is column-major C = alpha*op(A)*op(B) + beta*C with
// bfloat16 A and B, float C and float32 accumulation.
static int legorl_gemm_bf16(legorl_cublas* c, int transa, int transb, int m, int n, int k, float alpha,
	uintptr_t a, int lda, uintptr_t b, int ldb, float beta, uintptr_t cc, int ldc) {
	return c->gemmEx(c->handle, transa ? legorl_CUBLAS_OP_T : legorl_CUBLAS_OP_N,
		transb ? legorl_CUBLAS_OP_T : legorl_CUBLAS_OP_N, m, n, k, &alpha, (const void*)a, CUDA_R_16BF, lda,
		(const void*)b, CUDA_R_16BF, ldb, &beta, (void*)cc, CUDA_R_32F, ldc, legorl_CUBLAS_COMPUTE_32F,
		legorl_CUBLAS_GEMM_DEFAULT);
}

// legorl_jit_log loads image again with an error log buffer, for the
// message when cuModuleLoadData failed.
static int legorl_jit_log(const char* image, char* log, size_t n) {
	CUmodule mod;
	CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void* vals[2] = {log, (void*)n};
	CUresult r = cuModuleLoadDataEx(&mod, image, 2, opts, vals);
	if (r == CUDA_SUCCESS) {
		cuModuleUnload(mod);
	}
	return (int)r;
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	"gorgonia.org/cu"
)

// cublasSonames are tried in order: the CUDA 13 library of the GPU
// machines, CUDA 12, then whatever the unversioned name points to.
var cublasSonames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}

// cublas is a cuBLAS handle in a dlopen'ed library.
type cublas struct {
	c      *C.legorl_cublas // C memory
	soname string
}

// openCublas loads cuBLAS and creates a handle in the current context.
func openCublas() (*cublas, error) {
	c := (*C.legorl_cublas)(C.calloc(1, C.sizeof_legorl_cublas))
	var tried []string
	for _, name := range cublasSonames {
		cname := C.CString(name)
		msg := C.legorl_cublas_open(c, cname)
		C.free(unsafe.Pointer(cname))
		if msg != nil {
			tried = append(tried, C.GoString(msg))
			continue
		}
		b := &cublas{c: c, soname: name}
		if st := C.legorl_cublas_create(c); st != 0 {
			err := b.status("cublasCreate", st)
			C.free(unsafe.Pointer(c))
			return nil, err
		}
		return b, nil
	}
	C.free(unsafe.Pointer(c))
	return nil, fmt.Errorf("%w (precision bf16 needs it; put the directory of libcublas.so.13 or .so.12 on LD_LIBRARY_PATH): %s",
		ErrNoCUBLAS, strings.Join(tried, "; "))
}

func (b *cublas) status(what string, st C.int) error {
	msg := ""
	if s := C.legorl_cublas_status(b.c, st); s != nil {
		msg = " " + C.GoString(s)
	}
	return fmt.Errorf("%s (%s): cuBLAS status %d%s", what, b.soname, int(st), msg)
}

// gemmBF16 runs cublasGemmEx on bfloat16 A, B and float C, column-major.
func (b *cublas) gemmBF16(transA, transB bool, m, n, k int, alpha float32, a cu.DevicePtr, lda int, bb cu.DevicePtr, ldb int,
	beta float32, c cu.DevicePtr, ldc int) error {
	st := C.legorl_gemm_bf16(b.c, cbool(transA), cbool(transB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uintptr_t(a), C.int(lda), C.uintptr_t(bb), C.int(ldb), C.float(beta), C.uintptr_t(c), C.int(ldc))
	if st != 0 {
		return b.status("cublasGemmEx", st)
	}
	return nil
}

func (b *cublas) close() error {
	if b.c == nil {
		return nil
	}
	st := C.legorl_cublas_destroy(b.c)
	var err error
	if st != 0 {
		err = b.status("cublasDestroy", st)
	}
	C.free(unsafe.Pointer(b.c))
	b.c = nil
	return err
}

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

// jitLog returns the driver's JIT error log for ptx, formatted to append
// to an error, or "" when there is none.
func jitLog(ptx string) string {
	const n = 16 << 10
	buf := (*C.char)(C.calloc(n, 1))
	defer C.free(unsafe.Pointer(buf))
	img := C.CString(ptx)
	defer C.free(unsafe.Pointer(img))
	C.legorl_jit_log(img, buf, n)
	if s := strings.TrimSpace(C.GoString(buf)); s != "" {
		return "; JIT log: " + s
	}
	return ""
}
