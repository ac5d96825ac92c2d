/* SPDX-License-Identifier: MIT */
/*
 * Multi-Segment Attention on the GPU (the API is in msa.h, the block
 * configuration and shared-memory layout in msa_config.h).
 *
 * One kernel serves decode and prefill.  A block owns one (KV split,
 * sequence, KV head, tile of query tokens) and all the query heads of that
 * KV head's group, so each K/V byte is read once per group (GQA).  It
 * walks the sequence's segments in order, restricted to its split's range
 * of the concatenated context, in tiles of MSA_TILE tokens:
 *
 *   1. cp.async K and V of the tile into shared memory (two groups, so the
 *      V copy overlaps the score computation);
 *   2. scores s = (q * scale * log2 e) . k, masked to -inf where the KV
 *      position is after the query position;
 *   3. online softmax per row in the log2 domain: m' = max(m, max s),
 *      alpha = 2^(m - m'), p = 2^(s - m'), l' = l alpha + sum p;
 *   4. acc = acc alpha + p V.
 *
 * A tile never straddles segments: a segment boundary costs one partial
 * tile, which is why 8 segments cost little more than 1.  At the end each
 * row has O = acc / l and LSE = ln 2 (m + log2 l) (natural log); a row with
 * l = 0 saw nothing and gets O = 0, LSE = -inf.  With several splits these
 * are partial states in the workspace and msa_merge_kernel combines them.
 *
 * Accumulation is fp32 throughout; inputs are converted from fp16/bf16 as
 * they leave shared memory.
 */
#include <atomic>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/launch.cuh"
#include "kernels/msa.h"
#include "kernels/msa_config.h"

namespace
{

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/*
 * Compile-time twin of msa_kcfg_get() (KIND is enum msa_kind);
 * launch_one checks they agree.
 */
template <int D, int KIND> struct Cfg {
	static constexpr int DC = D / 8; /* 16-byte chunks per row */
	static constexpr int NTG =
		KIND == MSA_PREFILL ?
			1 :
			(KIND == MSA_DECODE_NARROW ? 1024 / D : 512 / D);
	static constexpr int RPT =
		KIND == MSA_DECODE || (KIND == MSA_PREFILL && D != 64) ? 8 : 4;
	static constexpr int NRG = MSA_THREADS / DC / NTG;
	static constexpr int ROWS = NRG * RPT;
	static_assert(DC *NTG *NRG == MSA_THREADS, "thread mapping");
};

struct MsaArgs {
	const void *q;
	const int32_t *q_pos;
	const uint32_t *q_start;
	const uint32_t *seg_start;
	const struct msa_segment *segs;
	float *o; /* split 0; split s at o + s * o_split_stride */
	float *lse; /* may be NULL */
	size_t o_split_stride, lse_split_stride;
	uint32_t hq, hkv, group, q_per_tile, split_len;
	float scale_log2;
};

#ifdef MSA_EMULATE
/* CPU emulation (kernels/emu): copies complete at once. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
	memcpy(smem, gmem, 16);
}

__device__ __forceinline__ void cp_async_commit()
{
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
}
#else
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
	unsigned s = (unsigned)__cvta_generic_to_shared(smem);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s),
		     "l"(gmem)
		     : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

/* Eight 2-byte elements (one 16-byte chunk) to floats. */
template <bool BF16> __device__ __forceinline__ void cvt8(uint4 raw, float *f)
{
	uint32_t w[4] = { raw.x, raw.y, raw.z, raw.w };

#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (BF16) {
			f[2 * i] = __uint_as_float(w[i] << 16);
			f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
		} else {
			__half2 h;
			float2 v;

			memcpy(&h, &w[i], sizeof(h));
			v = __half22float2(h);

			f[2 * i] = v.x;
			f[2 * i + 1] = v.y;
		}
	}
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/*
 * Scores of one tile: thread = one token (MSA_TILE threads per row group,
 * NG row groups), RB rows per pass so each K chunk read from shared memory
 * serves RB rows.  RB is picked from the row count so decode with a small
 * GQA group does not compute discarded rows.
 */
template <bool BF16, int D, int RB>
__device__ __forceinline__ void
score_pass(const float *q_s, const uint16_t *k_s, float *s_s,
	   const int32_t *qp_s, int n, int nrows, int32_t pos_first)
{
	constexpr int KST = D + MSA_KV_PAD, DC = D / 8;
	constexpr int NG = MSA_THREADS / MSA_TILE;
	const int tok = threadIdx.x % MSA_TILE, rg = threadIdx.x / MSA_TILE;

	if (tok >= n)
		return;
	for (int r0 = rg; r0 < nrows; r0 += NG * RB) {
		float dot[RB];
#pragma unroll
		for (int j = 0; j < RB; j++)
			dot[j] = 0.0f;
#pragma unroll 4
		for (int c = 0; c < DC; c++) {
			float kf[8];

			cvt8<BF16>(*reinterpret_cast<const uint4 *>(
					   k_s + tok * KST + c * 8),
				   kf);
#pragma unroll
			for (int j = 0; j < RB; j++) {
				/* Rows past the end recompute the last one. */
				int r = min(r0 + NG * j, nrows - 1);
				const float4 *qv =
					reinterpret_cast<const float4 *>(
						q_s + r * D + c * 8);
				float4 x = qv[0], y = qv[1];

				dot[j] += x.x * kf[0] + x.y * kf[1] +
					  x.z * kf[2] + x.w * kf[3] +
					  y.x * kf[4] + y.y * kf[5] +
					  y.z * kf[6] + y.w * kf[7];
			}
		}
#pragma unroll
		for (int j = 0; j < RB; j++) {
			int r = r0 + NG * j;

			if (r < nrows)
				s_s[r * MSA_TILE + tok] =
					pos_first + tok > qp_s[r] ? -INFINITY :
								    dot[j];
		}
	}
}

template <bool BF16, int D, int KIND>
__global__ void __launch_bounds__(MSA_THREADS) msa_kernel(const MsaArgs a)
{
	using C = Cfg<D, KIND>;
	constexpr int DC = C::DC, NTG = C::NTG, NRG = C::NRG, RPT = C::RPT;
	constexpr int ROWS = C::ROWS, KST = D + MSA_KV_PAD; /* K/V row stride */
#ifdef MSA_EMULATE
	unsigned char *smem = emu_dynamic_smem();
#else
	extern __shared__ __align__(16) unsigned char smem[];
#endif
	const struct msa_kcfg cfg = { D, NTG, NRG, RPT };
	float *q_s = reinterpret_cast<float *>(smem);
	unsigned char *kv = smem + msa_smem_q(&cfg);
	uint16_t *k_s = reinterpret_cast<uint16_t *>(kv);
	uint16_t *v_s = k_s + MSA_TILE * KST;
	float *s_s = reinterpret_cast<float *>(kv + msa_smem_kv(&cfg));
	float *m_s = s_s + ROWS * MSA_TILE;
	float *l_s = m_s + ROWS;
	float *al_s = l_s + ROWS;
	int32_t *qp_s = reinterpret_cast<int32_t *>(al_s + ROWS);
	__shared__ int32_t qmax_s;

	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const uint32_t split = blockIdx.x;
	const uint32_t b = blockIdx.y / a.hkv, h = blockIdx.y % a.hkv;
	const uint32_t q0 = a.q_start[b], q1 = a.q_start[b + 1];
	const uint32_t t0 = q0 + blockIdx.z * a.q_per_tile;
	if (t0 >= q1)
		return; /* whole block: no query token in this tile */
	const uint32_t mt = min(a.q_per_tile, q1 - t0);
	const int nrows = (int)(mt * a.group);
	const size_t kv_row = (size_t)a.hkv * D * 2; /* bytes per token */

	/* Queries of the tile, pre-scaled into the log2 domain. */
	for (int i = tid; i < nrows * DC; i += MSA_THREADS) {
		int r = i / DC, c = i % DC;
		size_t qrow = (size_t)(t0 + r / a.group) * a.hq + h * a.group +
			      r % a.group;
		uint4 raw = *reinterpret_cast<const uint4 *>(
			static_cast<const uint16_t *>(a.q) + qrow * D + c * 8);
		float f[8];

		cvt8<BF16>(raw, f);
#pragma unroll
		for (int e = 0; e < 8; e++)
			q_s[r * D + c * 8 + e] = f[e] * a.scale_log2;
	}
	for (int r = tid; r < nrows; r += MSA_THREADS) {
		qp_s[r] = a.q_pos[t0 + r / a.group];
		m_s[r] = -INFINITY;
		l_s[r] = 0.0f;
	}
	if (tid == 0) {
		int32_t mx = INT32_MIN;

		for (uint32_t i = 0; i < mt; i++)
			mx = max(mx, a.q_pos[t0 + i]);
		qmax_s = mx;
	}
	__syncthreads();
	const int32_t qmax = qmax_s;

	float acc[RPT][8];
#pragma unroll
	for (int j = 0; j < RPT; j++)
#pragma unroll
		for (int e = 0; e < 8; e++)
			acc[j][e] = 0.0f;
	const int dc = tid % DC, tg = (tid / DC) % NTG, rg = tid / (DC * NTG);

	/* The last split takes everything left, whatever max_kv_per_seq said. */
	const uint32_t kb = split * a.split_len;
	const uint32_t ke = split + 1 == gridDim.x ? UINT32_MAX :
						     kb + a.split_len;
	const uint32_t sg1 = a.seg_start[b + 1];
	uint32_t cursor = 0;
	for (uint32_t sg = a.seg_start[b]; sg < sg1 && cursor < ke; sg++) {
		const struct msa_segment seg = a.segs[sg];
		const uint32_t s_lo = cursor, s_hi = cursor + seg.len;
		const uint32_t lo = max(kb, s_lo), hi = min(ke, s_hi);

		cursor = s_hi;
		for (uint32_t t = lo; t < hi; t += MSA_TILE) {
			const int n = (int)min((uint32_t)MSA_TILE, hi - t);
			const uint32_t off = t - s_lo;
			const int32_t pos_first = seg.pos0 + (int32_t)off;

			/* Positions rise along a segment: the rest is masked. */
			if (pos_first > qmax)
				break;
			const char *kg = static_cast<const char *>(seg.k) +
					 off * kv_row + (size_t)h * D * 2;
			const char *vg = static_cast<const char *>(seg.v) +
					 off * kv_row + (size_t)h * D * 2;

			/* 1. K and V tiles, as two cp.async groups. */
			for (int i = tid; i < n * DC; i += MSA_THREADS)
				cp_async16(k_s + (i / DC) * KST + (i % DC) * 8,
					   kg + (i / DC) * kv_row +
						   (i % DC) * 16);
			cp_async_commit();
			for (int i = tid; i < n * DC; i += MSA_THREADS)
				cp_async16(v_s + (i / DC) * KST + (i % DC) * 8,
					   vg + (i / DC) * kv_row +
						   (i % DC) * 16);
			cp_async_commit();
			cp_async_wait<1>();
			__syncthreads();

			/* 2. Scores: thread = one token, RB rows at a time. */
			if (nrows <= 2)
				score_pass<BF16, D, 1>(q_s, k_s, s_s, qp_s, n,
						       nrows, pos_first);
			else if (nrows <= 4)
				score_pass<BF16, D, 2>(q_s, k_s, s_s, qp_s, n,
						       nrows, pos_first);
			else
				score_pass<BF16, D, 4>(q_s, k_s, s_s, qp_s, n,
						       nrows, pos_first);
			__syncthreads();

			/* 3. Online softmax, one warp per row. */
			for (int r = warp; r < nrows; r += MSA_THREADS / 32) {
				float *sr = s_s + r * MSA_TILE;
				float s0 = lane < n ? sr[lane] : -INFINITY;
				float s1 = lane + 32 < n ? sr[lane + 32] :
							   -INFINITY;
				float m_old = m_s[r];
				float m_new =
					fmaxf(m_old, warp_max(fmaxf(s0, s1)));
				float alpha = 1.0f, p0 = 0.0f, p1 = 0.0f;

				if (m_new != -INFINITY) {
					alpha = exp2f(m_old - m_new);
					p0 = exp2f(s0 - m_new);
					p1 = exp2f(s1 - m_new);
				}
				float sum = warp_sum(p0 + p1);
				if (lane < n)
					sr[lane] = p0;
				if (lane + 32 < n)
					sr[lane + 32] = p1;
				if (lane == 0) {
					m_s[r] = m_new;
					l_s[r] = l_s[r] * alpha + sum;
					al_s[r] = alpha;
				}
			}
			cp_async_wait<0>();
			__syncthreads();

			/* 4. acc = acc * alpha + P V. */
#pragma unroll
			for (int j = 0; j < RPT; j++) {
				int r = rg + NRG * j;

				if (r < nrows) {
					float al = al_s[r];
#pragma unroll
					for (int e = 0; e < 8; e++)
						acc[j][e] *= al;
				}
			}
			for (int tok = tg; tok < n; tok += NTG) {
				float vf[8];

				cvt8<BF16>(*reinterpret_cast<const uint4 *>(
						   v_s + tok * KST + dc * 8),
					   vf);
#pragma unroll
				for (int j = 0; j < RPT; j++) {
					int r = rg + NRG * j;

					if (r < nrows) {
						float p =
							s_s[r * MSA_TILE + tok];
#pragma unroll
						for (int e = 0; e < 8; e++)
							acc[j][e] += p * vf[e];
					}
				}
			}
			__syncthreads(); /* before the next tile overwrites */
		}
	}

	/* Sum the token groups' accumulators (decode configuration). */
	if (NTG > 1) {
		float *red = reinterpret_cast<float *>(kv);

		__syncthreads();
#pragma unroll
		for (int j = 0; j < RPT; j++) {
			int r = rg + NRG * j;

			if (r < nrows)
#pragma unroll
				for (int e = 0; e < 8; e++)
					red[((size_t)tg * ROWS + r) * D +
					    dc * 8 + e] = acc[j][e];
		}
		__syncthreads();
		if (tg == 0) {
#pragma unroll
			for (int j = 0; j < RPT; j++) {
				int r = rg + NRG * j;

				if (r < nrows)
					for (int g = 1; g < NTG; g++)
#pragma unroll
						for (int e = 0; e < 8; e++)
							acc[j][e] +=
								red[((size_t)g *
									     ROWS +
								     r) * D +
								    dc * 8 + e];
			}
		}
	}
	if (tg != 0)
		return;
#pragma unroll
	for (int j = 0; j < RPT; j++) {
		int r = rg + NRG * j;

		if (r >= nrows)
			continue;
		size_t row = (size_t)(t0 + r / a.group) * a.hq + h * a.group +
			     r % a.group;
		float l = l_s[r], inv = l > 0.0f ? 1.0f / l : 0.0f;
		float4 *out = reinterpret_cast<float4 *>(
			a.o + split * a.o_split_stride + row * D + dc * 8);

		out[0] = make_float4(acc[j][0] * inv, acc[j][1] * inv,
				     acc[j][2] * inv, acc[j][3] * inv);
		out[1] = make_float4(acc[j][4] * inv, acc[j][5] * inv,
				     acc[j][6] * inv, acc[j][7] * inv);
		if (dc == 0 && a.lse)
			a.lse[split * a.lse_split_stride + row] =
				l > 0.0f ? (m_s[r] + log2f(l)) * kLn2 :
					   -INFINITY;
	}
}

/*
 * One warp per row: lse = ln sum_j e^lse_j, o = sum_j e^(lse_j - lse) o_j.
 * Lanes compute 32 weights at a time and share them by shuffle.
 */
__global__ void __launch_bounds__(256)
	msa_merge_kernel(const float *o_in, const float *lse_in, uint32_t n,
			 uint32_t rows, uint32_t dim, float *o_out,
			 float *lse_out)
{
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t row = blockIdx.x * 8 + (threadIdx.x >> 5);
	float mx = -INFINITY, sum = 0.0f, lse, acc[8];

	if (row >= rows)
		return;
	for (uint32_t j = lane; j < n; j += 32)
		mx = fmaxf(mx, lse_in[(size_t)j * rows + row]);
	mx = warp_max(mx);
	if (mx != -INFINITY)
		for (uint32_t j = lane; j < n; j += 32)
			sum += expf(lse_in[(size_t)j * rows + row] - mx);
	sum = warp_sum(sum);
	lse = mx != -INFINITY ? mx + logf(sum) : -INFINITY;
#pragma unroll
	for (int i = 0; i < 8; i++)
		acc[i] = 0.0f;
	if (lse != -INFINITY) {
		for (uint32_t j0 = 0; j0 < n; j0 += 32) {
			uint32_t j = j0 + lane;
			float w = 0.0f;

			if (j < n)
				w = expf(lse_in[(size_t)j * rows + row] - lse);
			for (uint32_t jj = 0; jj < 32 && j0 + jj < n; jj++) {
				float wj = __shfl_sync(0xffffffffu, w, jj);
				const float *oj =
					o_in +
					((size_t)(j0 + jj) * rows + row) * dim;

				if (wj == 0.0f)
					continue; /* empty state: o_j unused */
#pragma unroll
				for (int i = 0; i < 8; i++) {
					uint32_t d = lane + 32 * i;

					if (d < dim)
						acc[i] += wj * oj[d];
				}
			}
		}
	}
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t d = lane + 32 * i;

		if (d < dim)
			o_out[(size_t)row * dim + d] = acc[i];
	}
	if (lane == 0 && lse_out)
		lse_out[row] = lse;
}

template <bool BF16, int D, int KIND>
int launch_one(const MsaArgs &a, const struct msa_plan *pl, cudaStream_t st)
{
	using C = Cfg<D, KIND>;
	auto k = msa_kernel<BF16, D, KIND>;
	dim3 grid(pl->num_splits, pl->grid_y, pl->num_q_tiles);
	struct msa_kcfg cfg;
	cudaError_t e;

	/* msa_config.h (used by the planner) and Cfg<> must agree. */
	if (!msa_kcfg_get(D, KIND, &cfg) || (int)cfg.ntg != C::NTG ||
	    (int)cfg.nrg != C::NRG || (int)cfg.rpt != C::RPT ||
	    pl->smem_bytes != msa_smem_bytes(&cfg))
		return -EINVAL;

	/*
	 * Opt in to more than 48 KiB of shared memory once per device (the
	 * attribute is per device; a repeated set is harmless, so a race
	 * between threads only costs a redundant call).
	 */
	static std::atomic<uint64_t> smem_set(0);
	int dev = 0;

	e = cudaGetDevice(&dev);
	if (e != cudaSuccess)
		return cuda_errno(e);
	if (dev >= 64 || !(smem_set.load() & (1ull << dev))) {
		e = cudaFuncSetAttribute(
			k, cudaFuncAttributeMaxDynamicSharedMemorySize,
			(int)pl->smem_bytes);
		if (e != cudaSuccess)
			return cuda_errno(e);
		if (dev < 64)
			smem_set.fetch_or(1ull << dev);
	}
	e = launch_kernel(k, grid, dim3(MSA_THREADS), pl->smem_bytes, st, a);
	return cuda_errno(e != cudaSuccess ? e : cudaGetLastError());
}

template <bool BF16, int D>
int launch_d(const MsaArgs &a, const struct msa_plan *pl, cudaStream_t st)
{
	switch (pl->kind) {
	case MSA_DECODE_NARROW:
		return launch_one<BF16, D, MSA_DECODE_NARROW>(a, pl, st);
	case MSA_DECODE:
		return launch_one<BF16, D, MSA_DECODE>(a, pl, st);
	case MSA_PREFILL:
		return launch_one<BF16, D, MSA_PREFILL>(a, pl, st);
	}
	return -EINVAL;
}

template <bool BF16>
int launch_dtype(const MsaArgs &a, uint32_t dim, const struct msa_plan *pl,
		 cudaStream_t st)
{
	switch (dim) {
	case 64:
		return launch_d<BF16, 64>(a, pl, st);
	case 128:
		return launch_d<BF16, 128>(a, pl, st);
	case 256:
		return launch_d<BF16, 256>(a, pl, st);
	}
	return -ENOTSUP;
}

} /* namespace */

extern "C" int msa_merge_launch(const float *o_in, const float *lse_in,
				uint32_t n_states, uint32_t rows,
				uint32_t head_dim, float *o_out, float *lse_out,
				void *stream)
{
	if (!head_dim || head_dim > 256)
		return -ENOTSUP;
	if (!rows)
		return 0;
	if (!o_out || (n_states && (!o_in || !lse_in)))
		return -EINVAL;
	return cuda_errno(launch_kernel(
		msa_merge_kernel, dim3((rows + 7) / 8), dim3(256), 0,
		static_cast<cudaStream_t>(stream), o_in, lse_in, n_states, rows,
		head_dim, o_out, lse_out));
}

extern "C" int msa_launch(const struct msa_problem *p,
			  const struct msa_plan *pl, void *workspace,
			  size_t workspace_bytes, void *stream)
{
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	struct msa_kcfg cfg;
	uint32_t group;
	size_t rows_total;
	MsaArgs a;
	int err = msa_problem_check(p, true);

	if (err)
		return err;
	if (!pl || pl->threads != MSA_THREADS || pl->kind > MSA_DECODE_NARROW)
		return -EINVAL;
	/* The plan must fit this problem (it may come from another call). */
	group = p->num_q_heads / p->num_kv_heads;
	if (!msa_kcfg_get(p->head_dim, (int)pl->kind, &cfg) ||
	    pl->rows_max != msa_kcfg_rows(&cfg) ||
	    pl->smem_bytes != msa_smem_bytes(&cfg) || !pl->q_per_tile ||
	    pl->q_per_tile * group > pl->rows_max ||
	    pl->grid_y != p->num_seqs * p->num_kv_heads ||
	    (uint64_t)pl->num_q_tiles * pl->q_per_tile < p->max_q_per_seq ||
	    !pl->num_splits ||
	    (uint64_t)pl->num_splits * pl->split_len < p->max_kv_per_seq)
		return -EINVAL;
	if (!p->num_q_tokens || !p->num_seqs)
		return 0;
	rows_total = (size_t)p->num_q_tokens * p->num_q_heads;
	if (pl->num_splits > 1 &&
	    (!workspace || workspace_bytes < pl->workspace_bytes ||
	     pl->workspace_bytes < (size_t)pl->num_splits * rows_total *
					   (p->head_dim + 1) * sizeof(float)))
		return -ENOSPC;

	a.q = p->q;
	a.q_pos = p->q_pos;
	a.q_start = p->q_start;
	a.seg_start = p->seg_start;
	a.segs = p->segs;
	a.hq = p->num_q_heads;
	a.hkv = p->num_kv_heads;
	a.group = group;
	a.q_per_tile = pl->q_per_tile;
	a.split_len = pl->split_len;
	a.scale_log2 = p->scale * kLog2e;
	if (pl->num_splits > 1) {
		a.o = static_cast<float *>(workspace);
		a.lse = a.o + (size_t)pl->num_splits * rows_total * p->head_dim;
		a.o_split_stride = rows_total * p->head_dim;
		a.lse_split_stride = rows_total;
	} else {
		a.o = p->o;
		a.lse = p->lse;
		a.o_split_stride = 0;
		a.lse_split_stride = 0;
	}
	err = p->dtype == MSA_BF16 ?
		      launch_dtype<true>(a, p->head_dim, pl, st) :
		      launch_dtype<false>(a, p->head_dim, pl, st);
	if (err || pl->num_splits == 1)
		return err;
	return msa_merge_launch(a.o, a.lse, pl->num_splits,
				(uint32_t)rows_total, p->head_dim, p->o, p->lse,
				stream);
}

extern "C" int msa_run(const struct msa_problem *p, void *workspace,
		       size_t workspace_bytes, void *stream)
{
	struct msa_plan pl;
	int dev, sms, err;

	err = cuda_errno(cudaGetDevice(&dev));
	if (!err)
		err = cuda_errno(cudaDeviceGetAttribute(
			&sms, cudaDevAttrMultiProcessorCount, dev));
	if (!err)
		err = msa_plan_make(p, (uint32_t)sms, &pl);
	if (!err)
		err = msa_launch(p, &pl, workspace, workspace_bytes, stream);
	return err;
}
