#include "emu_rt.h"
uint3_ threadIdx, blockIdx, blockDim, gridDim;
// A minimal x86-64 context switch: callee-saved registers on the stack,
// stack pointers swapped (no signal mask syscalls, unlike swapcontext).
extern "C" void emu_switch(void** save_sp, void* load_sp);
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	subq $8, %rsp
	stmxcsr (%rsp)
	fnstcw 4(%rsp)
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	ldmxcsr (%rsp)
	fldcw 4(%rsp)
	addq $8, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
)");
static void* sched_sp;
static std::vector<void*> fib_sp;
static std::vector<char*> stacks;
static std::vector<int> done;
static int cur;
static std::function<void()>* cur_body;
static const size_t STACK = 256 << 10;
extern "C" void emu_entry() {
	(*cur_body)();
	done[cur] = 1;
	void* dummy;
	emu_switch(&dummy, sched_sp);
	abort();
}
// emu_start is where a new fiber's first switch returns to: it calls
// emu_entry on an aligned stack.
asm(R"(
.text
.globl emu_start
emu_start:
	andq $-16, %rsp
	call emu_entry
	ud2
)");
extern "C" void emu_start();
static void* fresh_stack(char* base) {
	uint64_t* sp = (uint64_t*)(base + STACK);
	sp = (uint64_t*)((uintptr_t)sp & ~(uintptr_t)15);
	*--sp = 0;                       // padding
	*--sp = (uint64_t)emu_start;     // return address of emu_switch
	for (int i = 0; i < 6; i++) *--sp = 0; // rbp rbx r12 r13 r14 r15
	uint32_t csr[2];
	asm volatile("stmxcsr %0" : "=m"(csr[0]));
	asm volatile("fnstcw %0" : "=m"(csr[1]));
	sp--;
	memcpy(sp, csr, 8);
	return sp;
}
void __syncthreads() { emu_switch(&fib_sp[cur], sched_sp); }
void emu_run(unsigned gx, unsigned gy, unsigned bx, std::function<void()> body) {
	cur_body = &body;
	gridDim = {gx, gy, 1};
	blockDim = {bx, 1, 1};
	if (fib_sp.size() < bx) {
		fib_sp.resize(bx);
		while (stacks.size() < bx) stacks.push_back((char*)malloc(STACK));
		done.resize(bx);
	}
	for (unsigned by = 0; by < gy; by++) {
		for (unsigned b = 0; b < gx; b++) {
			blockIdx = {b, by, 0};
			for (unsigned t = 0; t < bx; t++) {
				fib_sp[t] = fresh_stack(stacks[t]);
				done[t] = 0;
			}
			int live = bx, phase = 0;
			while (live > 0) {
				int running = 0, finished = 0;
				for (unsigned t = 0; t < bx; t++) {
					if (done[t]) continue;
					cur = t;
					threadIdx = {t, 0, 0};
					emu_switch(&sched_sp, fib_sp[t]);
					if (done[t]) { live--; finished++; } else running++;
				}
				if (finished && running) { fprintf(stderr, "emu: divergent __syncthreads in block (%u,%u) phase %d\n", b, by, phase); abort(); }
				phase++;
			}
		}
	}
}
extern "C" int cuModuleLoadDataEx(void** m, const void*, unsigned, void*, void**) { *m = 0; return 0; }
extern "C" int cuModuleUnload(void*) { return 0; }
