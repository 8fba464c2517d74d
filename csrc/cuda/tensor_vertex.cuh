// warp_vertex's half-precision sums on tensor cores: copy_u-sum/mean and u_mul_e-sum/mean with a
// scalar weight, float16 or bfloat16, rows of whole 64-element slabs (team.cuh dispatches here
// where fits() holds).
//
// Why: the team fold converts every half to float before its add (sm_90 has no mixed add), so a
// half row costs as many instructions per edge as a float one, and on L2-resident graphs at F = 64
// the fold is issue-bound (session 16's profile: 86M instructions for 4.9M edges) where it should
// move half the bytes in half the time. mma.m16n8k16 multiplies halves exactly and adds in float:
// the accumulation DGL's float sums have, at 16 positions x 16 elements x 8 rows per instruction.
//
// A warp owns a unit of `grouping` blocks of kRows = 8 consecutive destination rows, and one
// 64-element slab of their output. Each mma takes up to 16 consecutive positions (CSC order) of
// one block as its K, 16 of the slab's elements as its M and the block's 8 rows as its N:
//   A[m][k] = the source row of position k, element m,
//   B[k][n] = the weight of position k (1 for copy_u) where position k belongs to row n, else 0,
//   D[m][n] += sum over k: the slab of row n, in float, across the block's positions.
// So the mma does the segmented sum itself; a block of rows of a few edges each fills its K with
// several rows' positions, as a warp of the team fold fills its lanes with several rows.
//
// Latency. A gather is two dependent round trips (the positions' source rows, then their
// elements); the team fold keeps one step of loads in flight per lane in registers, which its
// occupancy pays for. Here the elements go to shared memory by cp.async, which holds no register
// while in flight: each warp runs a ring of kStages chunks, a producer filling one while the
// consumer folds the chunk kStages - 1 behind it, across the blocks of its unit.
//
// Fragments (PTX ISA, mma.m16n8k16 .f16/.bf16; lane = 4 g + t): A's registers hold rows g and
// g + 8, columns 2t, 2t + 1, 2t + 8, 2t + 9; B's hold column g, rows 2t, 2t + 1, 2t + 8, 2t + 9;
// D's hold rows g and g + 8, columns 2t and 2t + 1. The slab element of A/D row m in tile j
// (j = 0..3) is 8g + 2j for m = g and 8g + 2j + 1 for m = g + 8: lane (g, t) then copies one
// 16-byte piece per position k (elements 8g..8g+7 of its source row), reads back only its own
// pieces, feeds all four tiles from them, and ends holding elements 8g..8g+7 of rows 2t and
// 2t + 1: a 16-byte store each.
//
// Exactness. A position's zero weight in the columns of the other rows multiplies its elements:
// an Inf or NaN there turns those rows' elements into NaN. A finite result is therefore exact
// (every term finite, the foreign ones exactly 0), and a lane whose 8 elements of a row hold a
// non-finite one sums them again alone over the row's positions, as the team fold would: the
// row's true sums, Inf and NaN included. Rows longer than the heavy bound belong to vertex_heavy_rows
// (team.cuh), launched before: here they are skipped, positions and stores.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common.cuh"
#include "functor.cuh"

// Build switch: 0 keeps every half sum on the team fold (for same-run A/B of the two paths).
#ifndef UGRAPH_TENSOR_SUMS
#define UGRAPH_TENSOR_SUMS 1
#endif


namespace ugraph {
namespace tensor {

constexpr int kRows = 8;    // destination rows per block: the mma's N
constexpr int kSlab = 64;   // output elements per pass: 8 lane groups x 8 halves
constexpr int kChunk = 16;  // positions per mma: its K
constexpr int kTiles = 4;   // mmas per chunk: kSlab / 16 (the mma's M)
#ifndef UGRAPH_TENSOR_STAGES
#define UGRAPH_TENSOR_STAGES 4
#endif
constexpr int kStages = UGRAPH_TENSOR_STAGES;  // chunks in a warp's ring: kStages - 1 in flight
// Blocks resident per SM: the ring's shared memory allows 3 (4 stages, 69 KB a block of 8 warps),
// and the registers are held to that (80 a lane), so that 24 warps keep 3 chunks each in flight.
#ifndef UGRAPH_TENSOR_BLOCKS
#define UGRAPH_TENSOR_BLOCKS 3
#endif
constexpr int kBlocksPerSm = UGRAPH_TENSOR_BLOCKS;

// Whether the ops of this instantiation are ones the tensor path runs: a sum (or mean) of half
// messages that are A's row (copy_u) or A's row times one value of B per position (u_mul_e with
// a scalar weight: B gathered once per vector, kGatherB).
template <typename Op, typename Reduce, typename DType, int kVec, bool kGatherB>
constexpr bool kEligible =
    UGRAPH_TENSOR_SUMS && is_half_v<DType> && kVec == 8 && std::is_same_v<Reduce, reduce::Sum<DType>> &&
    ((std::is_same_v<Op, binary::CopyLhs<DType>> && !kGatherB) || (std::is_same_v<Op, binary::Mul<DType>> && kGatherB));

// Host side, for an eligible instantiation: whether the case's shapes fit. A's rows are the
// output rows (no broadcast), whole 64-element slabs; B, where read, one value per position.
inline bool fits(const UgParams& p) {
  if (p.out_len % kSlab != 0 || p.a_len != p.out_len || p.a_off != nullptr || p.reduce_size != 1) return false;
  return p.edge_op == UG_COPY_LHS || (p.edge_op == UG_MUL && p.b_len == 1);
}

template <typename DType>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<DType, __half>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <typename DType>
__device__ __forceinline__ uint32_t bits_of(DType v) {
  uint16_t u;
  memcpy(&u, &v, sizeof(u));
  return u;
}

template <typename Pos>
__device__ __forceinline__ Pos shfl_pos(Pos v, int src) {
  if constexpr (sizeof(Pos) == 4) {
    return __shfl_sync(kFullMask, v, src);
  } else {
    return static_cast<Pos>(__shfl_sync(kFullMask, static_cast<unsigned long long>(v), src));
  }
}

// Stores a row's 8 sums (elements 8g..8g+7 of the slab) at `out`, as a 16-byte streaming store;
// where one came out non-finite, the 8 are summed again over the row's positions [lo, hi).
template <typename Op, typename DType, typename IdType>
__device__ __forceinline__ void store_row(const OpArgs<DType, IdType>& x, float (&v)[8], DType* out, int64_t elem,
                                          pos_t<IdType> lo, pos_t<IdType> hi) {
  bool finite = true;
#pragma unroll
  for (int i = 0; i < 8; ++i) finite = finite && isfinite(v[i]);
  if (!finite) {  // summed again in float, as the team fold sums: the row's own Inf and NaN only
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = 0.f;
    for (pos_t<IdType> p = lo; p < hi; ++p) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(x.a + int64_t(x.a_rows.row(p)) * x.a_stride + elem));
      DType a[8];
      memcpy(a, &raw, sizeof(raw));
      const float b = Op::use_rhs ? load(x.b + int64_t(x.b_rows.row(p)) * x.b_stride) : 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] += Op::Apply(to_acc(a[i]), b);
    }
  }
  if (x.mean) {
    const float inverse = 1.f / static_cast<float>(hi - lo > 1 ? hi - lo : 1);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= inverse;
  }
  DType h[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) h[i] = from_acc<DType>(v[i]);
  uint4 raw;
  memcpy(&raw, h, sizeof(raw));
  __stcs(reinterpret_cast<uint4*>(out), raw);
}

// A warp's ring of kStages chunks in shared memory: each lane's four 16-byte source-row pieces of
// a chunk arrive there by cp.async, which holds no register while in flight, so a warp keeps
// kStages - 1 chunks of loads in flight where the team fold keeps one step of registers. With
// each chunk: its positions' rows within the block (-1: none), their weights, the block's row
// bounds and which block of the unit it is.
template <typename Pos>
struct Stage {
  uint4 data[kChunk][8];  // [position][lane group g, swizzled]: elements 8g..8g+7 of its source row
  Pos bounds[kRows + 1];  // indptr of the block's rows (clamped to E past the last row)
  int32_t block;          // the block's index within the unit
  int32_t count;          // positions in the chunk; -1: the unit is done
  int8_t row[kChunk];
  uint16_t weight[kChunk];
};

// The 16-byte slot of lane group g for position k: g ^ 2 * (k / 2 % 4) keeps each quarter warp's
// eight LDS.128 (two groups, four lanes of positions) on distinct banks.
__device__ __forceinline__ int slot(int k, int g) { return g ^ (((k >> 1) & 3) << 1); }

__device__ __forceinline__ void copy_async(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit_async() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void wait_async() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

template <typename Op, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kBlocksPerSm)
    vertex_sum(const OpArgs<DType, IdType> x, const TileWalk walk, const int group, const int64_t blocks,
               const int64_t slabs, const int64_t heavy_degree) {
  using Pos = pos_t<IdType>;
  extern __shared__ __align__(16) unsigned char tensor_shared[];
  Stage<Pos>* const ring = reinterpret_cast<Stage<Pos>*>(tensor_shared) + (threadIdx.x / kWarp) * kStages;
  const Topology<IdType>& g = x.graph;
  const int lane = lane_id(), gq = lane >> 2, tq = lane & 3;
  const Pos num_dst = static_cast<Pos>(g.num_dst);
  int64_t unit;
  uint32_t tile;
  for (walk.first(global_warp(), unit, tile); unit < walk.units; walk.next(unit, tile)) {
    const int64_t first_block = unit * group;
    const int unit_blocks = static_cast<int>(min64(group, blocks - first_block));
    for (int64_t slab = tile; slab < slabs; slab += walk.tiles) {
      const int64_t elem = slab * kSlab + 8 * gq;
      const DType* const a_lane = x.a + elem;
      // The producer walks the unit's blocks, and in each the runs of consecutive rows that are
      // not heavy, in chunks of up to kChunk positions; a block with no position to fold gives
      // one empty chunk, so that its rows are still stored. Every branch is warp-uniform.
      int p_block = -1, p_r = kRows;
      bool p_emitted = true;
      Pos p_lo = 0, p_hi = 0, p_pos = 0, p_end = 0, p_r0 = 0;
      unsigned p_heavy = 0;
      auto produce = [&](Stage<Pos>& st) {
        Pos base = 0, end = 0;
        int count = -1;
        while (true) {
          if (p_pos < p_end) {
            base = p_pos;
            end = min(p_pos + Pos(kChunk), p_end);
            p_pos = end;
            p_emitted = true;
            count = static_cast<int>(end - base);
            break;
          }
          while (p_r < kRows && ((p_heavy >> (4 * p_r)) & 1u)) ++p_r;
          if (p_r < kRows) {
            int r_end = p_r + 1;
            while (r_end < kRows && !((p_heavy >> (4 * r_end)) & 1u)) ++r_end;
            p_pos = shfl_pos(p_lo, 4 * p_r);
            p_end = shfl_pos(p_hi, 4 * (r_end - 1));
            p_r = r_end;
            continue;
          }
          if (!p_emitted) {
            p_emitted = true;
            count = 0;
            break;
          }
          if (++p_block >= unit_blocks) break;
          p_r0 = static_cast<Pos>((first_block + p_block) * kRows);
          p_lo = g.begin_pos(min(p_r0 + Pos(gq), num_dst));
          p_hi = g.begin_pos(min(p_r0 + Pos(gq) + 1, num_dst));
          p_heavy = __ballot_sync(kFullMask, int64_t(p_hi - p_lo) > heavy_degree) & 0x11111111u;
          p_r = 0;
          p_emitted = false;
          p_pos = p_end = 0;
        }
        if (count > 0) {
          const Pos q = base + Pos(lane & (kChunk - 1));
          const bool in = q < end;
          const Pos src = in ? static_cast<Pos>(x.a_rows.row(q)) : Pos(0);
          if (lane < kChunk) {
            st.row[lane] = in ? static_cast<int8_t>(g.dst_pos(q) - p_r0) : int8_t(-1);
            if constexpr (Op::use_rhs) {
              st.weight[lane] = in ? static_cast<uint16_t>(bits_of(__ldg(x.b + int64_t(x.b_rows.row(q)) * x.b_stride))) : 0;
            } else {
              st.weight[lane] = static_cast<uint16_t>(bits_of(from_acc<DType>(1.f)));
            }
          }
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int k = 2 * tq + (i & 1) + 8 * (i >> 1);
            const Pos s_k = shfl_pos(src, k);
            copy_async(&st.data[k][slot(k, gq)], row_ptr(a_lane, base + Pos(k) < end ? s_k : Pos(0), x.a_row_bytes),
                       base + Pos(k) < end);
          }
        }
        if (count >= 0) {
          const Pos lo_n = shfl_pos(p_lo, 4 * min(lane, kRows - 1)), hi_last = shfl_pos(p_hi, 4 * (kRows - 1));
          if (lane <= kRows) st.bounds[lane] = lane < kRows ? lo_n : hi_last;
        }
        if (lane == 0) {
          st.block = p_block;
          st.count = count;
        }
        commit_async();
      };
#pragma unroll 1
      for (int s = 0; s < kStages - 1; ++s) produce(ring[s]);
      float d[kTiles][4] = {};
      int block = -1;
      Pos lo_n[2] = {0, 0}, hi_n[2] = {0, 0};
      auto store = [&] {
        const Pos r0 = static_cast<Pos>((first_block + block) * kRows);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const Pos v = r0 + Pos(2 * tq + h);
          if (v >= num_dst || int64_t(hi_n[h] - lo_n[h]) > heavy_degree) continue;
          float out[8];
#pragma unroll
          for (int j = 0; j < kTiles; ++j) {
            out[2 * j] = d[j][h];
            out[2 * j + 1] = d[j][2 + h];
          }
          store_row<Op>(x, out, row_ptr(x.c + elem, v, x.c_row_bytes), elem, lo_n[h], hi_n[h]);
        }
      };
#pragma unroll 1
      for (int i = 0;; ++i) {
        produce(ring[(i + kStages - 1) % kStages]);
        wait_async<kStages - 1>();
        __syncwarp();
        Stage<Pos>& st = ring[i % kStages];
        const int count = st.count;
        if (count < 0) break;
        if (st.block != block) {
          if (block >= 0) store();
          block = st.block;
#pragma unroll
          for (int j = 0; j < kTiles; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.f;
          lo_n[0] = st.bounds[2 * tq];
          hi_n[0] = lo_n[1] = st.bounds[2 * tq + 1];
          hi_n[1] = st.bounds[2 * tq + 2];
        }
        if (count > 0) {
          uint32_t bk[4];
          const uint32_t* words[4];
#pragma unroll
          for (int i2 = 0; i2 < 4; ++i2) {
            const int k = 2 * tq + (i2 & 1) + 8 * (i2 >> 1);
            words[i2] = reinterpret_cast<const uint32_t*>(&st.data[k][slot(k, gq)]);
            bk[i2] = st.row[k] == gq ? st.weight[k] : 0u;
          }
          const uint32_t b0 = bk[0] | (bk[1] << 16), b1 = bk[2] | (bk[3] << 16);
          // Word j of the four positions' pieces at a time (LDS.32): tile j's A only.
#pragma unroll
          for (int j = 0; j < kTiles; ++j) {
            const uint32_t w0 = words[0][j], w1 = words[1][j], w2 = words[2][j], w3 = words[3][j];
            const uint32_t a[4] = {__byte_perm(w0, w1, 0x5410), __byte_perm(w0, w1, 0x7632),
                                   __byte_perm(w2, w3, 0x5410), __byte_perm(w2, w3, 0x7632)};
            mma<DType>(d[j], a, b0, b1);
          }
        }
        __syncwarp();  // the stage is written again by the next iteration's producer
      }
      if (block >= 0) store();
      wait_async<0>();
      __syncwarp();
    }
  }
}

// Host side: lets kKernel take `bytes` of dynamic shared memory (past the 48 KB default), asked
// once per device.
template <auto kKernel>
cudaError_t shared_memory_at_least(int bytes) {
  static std::atomic<uint64_t> done{0};
  int device = 0;
  UG_CUDA_TRY(cudaGetDevice(&device));
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t(1) << device : 0;
  if (bit && (done.load(std::memory_order_relaxed) & bit)) return cudaSuccess;
  UG_CUDA_TRY(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.fetch_or(bit, std::memory_order_relaxed);
  return cudaSuccess;
}

// Host side: units of `grouping` blocks of kRows rows, each row's slabs spread over up to
// `tiling` warps.
template <typename Op, typename DType, typename IdType>
cudaError_t launch_vertex_sum(const UgParams& p, const OpArgs<DType, IdType>& x, int64_t heavy_degree,
                              cudaStream_t stream) {
  using Pos = pos_t<IdType>;
  const int64_t slabs = p.out_len / kSlab, blocks = ceil_div(p.num_dst, kRows);
  const LaunchPlan plan = plan_launch(ceil_div(blocks, p.grouping), std::min<int64_t>(p.tiling, slabs), kWarp);
  constexpr int kShared = kWarpsPerBlock * kStages * static_cast<int>(sizeof(Stage<Pos>));
  constexpr auto kKernel = vertex_sum<Op, DType, IdType>;
  UG_CUDA_TRY(shared_memory_at_least<kKernel>(kShared));
  kKernel<<<plan.grid, kBlock, kShared, stream>>>(x, plan.walk, p.grouping, blocks, slabs, heavy_degree);
  return cudaGetLastError();
}

}  // namespace tensor
}  // namespace ugraph
