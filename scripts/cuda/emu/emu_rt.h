// emu_rt.h: CUDA-like runtime on the host: one block at a time, its threads
// as fibers (ucontext) switched at __syncthreads.
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <functional>
#include <vector>
#include <stdlib.h>
#include <stdio.h>
struct uint3_ { unsigned x, y, z; };
extern uint3_ threadIdx, blockIdx, blockDim, gridDim;
void __syncthreads();
void emu_run(unsigned gx, unsigned gy, unsigned bx, std::function<void()> body);
#define __global__
#define __device__
#define __shared__ static
