/* SPDX-License-Identifier: MIT */
/*
 * CUDA emulation runtime: runs the project's CUDA kernels on the CPU so
 * the CUDA sources are tested in `make check` on machines without a GPU.
 *
 * A launch runs its blocks one after another.  A block's threads are
 * ucontext fibers on the calling thread, switched only at barriers:
 * __syncthreads waits for every live thread of the block, a warp shuffle
 * for every live lane of the warp (each shuffle is two warp barriers:
 * publish, then read).  Threads that exit stop counting, as on the GPU.
 * If no fiber can run while some still wait, the kernel has a divergent
 * barrier: that is reported and the program aborts.  Shared memory is a
 * fresh heap buffer of exactly the launch's size (so ASan builds catch
 * overruns), and a launch needing more than 48 KiB without
 * cudaFuncSetAttribute fails as it would on a GPU.
 *
 * "Device" memory is host memory; copies are memcpy; events read the
 * host clock.  Not thread-safe (one launch at a time).
 */
#include <map>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>
#include <vector>

#include "cuda_runtime.h"

#if defined(__x86_64__)
/*
 * emu_switch(save, to): push the callee-saved registers, store the stack
 * pointer in *save, load `to`, pop and return into the other context.
 */
extern "C" void emu_switch(void **save, void *to);
asm(".text\n"
    ".globl emu_switch\n"
    ".type emu_switch,@function\n"
    "emu_switch:\n"
    "	pushq %rbp\n"
    "	pushq %rbx\n"
    "	pushq %r12\n"
    "	pushq %r13\n"
    "	pushq %r14\n"
    "	pushq %r15\n"
    "	movq %rsp, (%rdi)\n"
    "	movq %rsi, %rsp\n"
    "	popq %r15\n"
    "	popq %r14\n"
    "	popq %r13\n"
    "	popq %r12\n"
    "	popq %rbx\n"
    "	popq %rbp\n"
    "	ret\n"
    ".size emu_switch, .-emu_switch\n");
#define EMU_ASM_SWITCH 1
#endif

namespace
{

constexpr size_t kStack = 64 * 1024;
constexpr int kSmemLimit = 232448; /* sm_90 opt-in maximum */

enum { F_READY, F_BLOCK_WAIT, F_WARP_WAIT, F_DONE };

struct Fiber {
	ucontext_t ctx;
	void *sp; /* saved stack pointer (assembly switch) */
	uint3 tid;
	int state;
	unsigned gen;
	char *stack;
};

struct Block {
	std::vector<Fiber> fibers;
	ucontext_t sched;
	void *sched_sp;
	int cur;
	int live;
	unsigned bar_gen, bar_arrived;
	std::vector<int> warp_live;
	std::vector<unsigned> warp_gen, warp_arrived;
	std::vector<float> shfl;
	std::function<void()> *fn;
};

Block *blk;
/* Fiber stacks, reused by every block (one per thread), freed at exit. */
struct StackPool {
	std::vector<char *> v;
	~StackPool()
	{
		for (char *p : v)
			free(p);
	}
} stack_pool;
std::vector<char *> &stacks = stack_pool.v;
unsigned char *smem_buf;
std::map<const void *, int> max_smem;
cudaError_t last_error = cudaSuccess;
int sm_count = 132;

void fail(const char *what)
{
	fprintf(stderr, "cuda-emu: %s (block %u,%u,%u thread %u)\n", what,
		emu_block_idx.x, emu_block_idx.y, emu_block_idx.z,
		blk ? blk->fibers[blk->cur].tid.x : 0);
	abort();
}

void yield_to_scheduler()
{
	Fiber &f = blk->fibers[blk->cur];

#ifdef EMU_ASM_SWITCH
	emu_switch(&f.sp, blk->sched_sp);
#else
	swapcontext(&f.ctx, &blk->sched);
#endif
}

/* Release barriers that every remaining live thread has reached. */
void check_releases()
{
	if (blk->bar_arrived && blk->bar_arrived == (unsigned)blk->live) {
		blk->bar_gen++;
		blk->bar_arrived = 0;
	}
	for (size_t w = 0; w < blk->warp_live.size(); w++)
		if (blk->warp_arrived[w] &&
		    blk->warp_arrived[w] == (unsigned)blk->warp_live[w]) {
			blk->warp_gen[w]++;
			blk->warp_arrived[w] = 0;
		}
}

void warp_barrier()
{
	Fiber &f = blk->fibers[blk->cur];
	unsigned w = f.tid.x / 32;

	f.state = F_WARP_WAIT;
	f.gen = blk->warp_gen[w];
	blk->warp_arrived[w]++;
	check_releases();
	if (blk->warp_gen[w] == f.gen)
		yield_to_scheduler();
	f.state = F_READY;
}

void trampoline()
{
	Fiber &f = blk->fibers[blk->cur];

	(*blk->fn)();
	f.state = F_DONE;
	blk->live--;
	blk->warp_live[f.tid.x / 32]--;
	check_releases();
#ifdef EMU_ASM_SWITCH
	{
		void *dead;

		emu_switch(&dead, blk->sched_sp); /* never resumed */
	}
#endif
	/* ucontext: uc_link returns to the scheduler. */
}

bool runnable(const Fiber &f)
{
	switch (f.state) {
	case F_READY:
		return true;
	case F_BLOCK_WAIT:
		return blk->bar_gen != f.gen;
	case F_WARP_WAIT:
		return blk->warp_gen[f.tid.x / 32] != f.gen;
	}
	return false;
}

void run_block(unsigned threads, std::function<void()> &fn)
{
	Block b;

	b.fibers.resize(threads);
	b.live = (int)threads;
	b.bar_gen = b.bar_arrived = 0;
	b.warp_live.assign((threads + 31) / 32, 0);
	b.warp_gen.assign(b.warp_live.size(), 0);
	b.warp_arrived.assign(b.warp_live.size(), 0);
	b.shfl.assign(b.warp_live.size() * 32, 0.0f);
	b.fn = &fn;
	blk = &b;
	for (unsigned t = 0; t < threads; t++) {
		Fiber &f = b.fibers[t];

		b.warp_live[t / 32]++;
		f.tid.x = t;
		f.tid.y = f.tid.z = 0;
		f.state = F_READY;
		while (stacks.size() <= t) {
			char *st = static_cast<char *>(malloc(kStack));

			if (!st)
				fail("out of memory for fiber stacks");
			stacks.push_back(st);
		}
		f.stack = stacks[t];
#ifdef EMU_ASM_SWITCH
		{
			/* Six zeroed registers, then trampoline as the return
			 * address, then a fake caller's return address: the
			 * ABI's rsp % 16 == 8 at function entry. */
			uintptr_t top = ((uintptr_t)f.stack + kStack) & ~(uintptr_t)15;
			void **sp = reinterpret_cast<void **>(top) - 8;

			memset(sp, 0, 8 * sizeof(void *));
			sp[6] = reinterpret_cast<void *>(trampoline);
			f.sp = sp;
		}
#else
		getcontext(&f.ctx);
		f.ctx.uc_stack.ss_sp = f.stack;
		f.ctx.uc_stack.ss_size = kStack;
		f.ctx.uc_link = &b.sched;
		makecontext(&f.ctx, trampoline, 0);
#endif
	}
	for (;;) {
		int done = 0, ran = 0;

		for (unsigned t = 0; t < threads; t++) {
			Fiber &f = b.fibers[t];

			if (f.state == F_DONE) {
				done++;
				continue;
			}
			if (!runnable(f))
				continue;
			b.cur = (int)t;
			ran++;
#ifdef EMU_ASM_SWITCH
			emu_switch(&b.sched_sp, f.sp);
#else
			swapcontext(&b.sched, &f.ctx);
#endif
		}
		if (done == (int)threads)
			break;
		if (!ran)
			fail("deadlock: a barrier is not reached by every live thread");
	}
	blk = nullptr;
}

double now_ms()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

} /* namespace */

uint3 emu_block_idx;
dim3 emu_grid_dim, emu_block_dim;

const uint3 &emu_thread_idx()
{
	return blk->fibers[blk->cur].tid;
}

void __syncthreads()
{
	Fiber &f = blk->fibers[blk->cur];

	f.state = F_BLOCK_WAIT;
	f.gen = blk->bar_gen;
	blk->bar_arrived++;
	check_releases();
	if (blk->bar_gen == f.gen)
		yield_to_scheduler();
	f.state = F_READY;
}

float emu_shfl(float v, int src_lane)
{
	unsigned t = blk->fibers[blk->cur].tid.x, w = t / 32;
	float r;

	if (blk->warp_live[w] != 32)
		fail("shuffle in a warp with exited lanes");
	blk->shfl[t] = v;
	warp_barrier();
	r = blk->shfl[w * 32 + (unsigned)(src_lane & 31)];
	warp_barrier();
	return r;
}

unsigned char *emu_dynamic_smem()
{
	return smem_buf;
}

void emu_set_max_dynamic_smem(const void *kernel, int bytes)
{
	max_smem[kernel] = bytes;
}

cudaError_t emu_launch(const void *kernel, dim3 grid, dim3 block, size_t smem,
		       std::function<void()> fn)
{
	auto it = max_smem.find(kernel);
	int limit = it == max_smem.end() ? 49152 : it->second;

	if (block.x > 1024 || block.y != 1 || block.z != 1 || !block.x ||
	    !grid.x || !grid.y || !grid.z || grid.y > 65535 ||
	    grid.z > 65535 || smem > (size_t)limit || limit > kSmemLimit)
		return last_error = cudaErrorInvalidConfiguration;
	smem_buf = static_cast<unsigned char *>(malloc(smem ? smem : 1));
	if (!smem_buf)
		return last_error = cudaErrorMemoryAllocation;
	/* Garbage, not zeros: a kernel must not rely on cleared memory. */
	memset(smem_buf, 0x7f, smem);
	emu_grid_dim = grid;
	emu_block_dim = block;
	for (unsigned z = 0; z < grid.z; z++)
		for (unsigned y = 0; y < grid.y; y++)
			for (unsigned x = 0; x < grid.x; x++) {
				emu_block_idx.x = x;
				emu_block_idx.y = y;
				emu_block_idx.z = z;
				run_block(block.x, fn);
			}
	free(smem_buf);
	smem_buf = nullptr;
	return cudaSuccess;
}

extern "C" {

void emu_set_sm_count(int sms)
{
	sm_count = sms;
}

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev)
{
	return dev == 0 ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaGetDevice(int *dev)
{
	*dev = 0;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int dev)
{
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "cuda-emu (CPU)");
	prop->totalGlobalMem = (size_t)1 << 32;
	prop->major = 9;
	return dev == 0 ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
				   int dev)
{
	if (attr != cudaDevAttrMultiProcessorCount || dev)
		return cudaErrorInvalidValue;
	*value = sm_count;
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	*p = aligned_alloc(256, (bytes + 255) / 256 * 256);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
	return cudaMalloc(p, bytes);
}

cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
		       enum cudaMemcpyKind)
{
	memmove(dst, src, bytes);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
			    enum cudaMemcpyKind kind, cudaStream_t)
{
	return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
	memset(p, value, bytes);
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "emulated CUDA error";
}

struct emu_event {
	double ms;
};

cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
	*ev = new emu_event{ 0 };
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t)
{
	ev->ms = now_ms();
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t)
{
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = (float)(b->ms - a->ms);
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
	delete ev;
	return cudaSuccess;
}
}
