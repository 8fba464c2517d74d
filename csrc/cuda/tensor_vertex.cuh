// warp_vertex's half-precision sums on tensor cores: copy_u-sum/mean and u_mul_e-sum/mean with a
// scalar weight, float16 or bfloat16, rows of whole 64-element slabs (team.cuh dispatches here
// where tensor_sum_fits holds).
//
// Why: the team fold converts every half to float before its add (sm_90 has no mixed add), so a
// half row costs as many instructions per edge as a float one, and on L2-resident graphs at F = 64
// the fold is issue-bound (session 16's profile: 86M instructions for 4.9M edges) where it should
// move half the bytes in half the time. mma.m16n8k16 multiplies halves exactly and adds in float:
// the accumulation DGL's float sums have, at 16 positions x 16 elements x 8 rows per instruction.
//
// A warp owns a block of kRows = 8 consecutive destination rows and one 64-element slab of their
// output. Each mma takes 16 consecutive positions (CSC order) of the block as its K, 16 of the
// slab's elements as its M and the block's 8 rows as its N:
//   A[m][k] = the source row of position k, element m (gathered: 16-byte loads, repacked by PRMT),
//   B[k][n] = the weight of position k (1 for copy_u) where position k belongs to row n, else 0,
//   D[m][n] += sum over k: the slab of row n, in float, across the block's positions.
// So the mma does the segmented sum itself; a block of rows of a few edges each fills its K with
// several rows' positions, as a warp of the team fold fills its lanes with several rows.
//
// Fragments (PTX ISA, mma.m16n8k16 .f16/.bf16; lane = 4 g + t): A's registers hold rows g and
// g + 8, columns 2t, 2t + 1, 2t + 8, 2t + 9; B's hold column g, rows 2t, 2t + 1, 2t + 8, 2t + 9;
// D's hold rows g and g + 8, columns 2t and 2t + 1. The slab element of A/D row m in tile j
// (j = 0..3) is 8g + 2j for m = g and 8g + 2j + 1 for m = g + 8: lane (g, t) then loads one
// 16-byte vector per position k (elements 8g..8g+7 of its source row) and feeds all four tiles
// from it, and ends holding elements 8g..8g+7 of rows 2t and 2t + 1: a 16-byte store each.
//
// Exactness. A position's zero weight in the columns of the other rows multiplies its elements:
// an Inf or NaN there turns those rows' elements into NaN. A finite result is therefore exact
// (every term finite, the foreign ones exactly 0), and any element that comes out non-finite is
// summed again by its lane alone over its row's positions, as the team fold would: the row's
// true sum, Inf and NaN included. Rows longer than the heavy bound belong to vertex_heavy_rows
// (team.cuh), launched before: here they are skipped, positions and stores.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common.cuh"
#include "functor.cuh"

// Build switch: 0 keeps every half sum on the team fold (for same-run A/B of the two paths).
#ifndef UGRAPH_TENSOR_SUMS
#define UGRAPH_TENSOR_SUMS 1
#endif
#ifndef UGRAPH_TENSOR_AHEAD
#define UGRAPH_TENSOR_AHEAD 0
#endif

namespace ugraph {
namespace tensor {

constexpr int kRows = 8;    // destination rows per block: the mma's N
constexpr int kSlab = 64;   // output elements per pass: 8 lane groups x 8 halves
constexpr int kChunk = 16;  // positions per mma: its K
constexpr int kTiles = 4;   // mmas per chunk: kSlab / 16 (the mma's M)

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

// The message of position p at slab element `elem`, for the lane that sums a non-finite element
// again on its own.
template <typename Op, typename DType, typename IdType>
__device__ __forceinline__ float message_at(const OpArgs<DType, IdType>& x, pos_t<IdType> p, int64_t elem) {
  const float a = load(x.a + int64_t(x.a_rows.row(p)) * x.a_stride + elem);
  const float b = Op::use_rhs ? load(x.b + int64_t(x.b_rows.row(p)) * x.b_stride) : 0.f;
  return Op::Apply(a, b);
}

// Stores a row's 8 sums (elements 8g..8g+7 of the slab) at `out`, as a 16-byte streaming store;
// elements that came out non-finite are summed again over the row's positions [lo, hi).
template <typename Op, typename DType, typename IdType>
__device__ __forceinline__ void store_row(const OpArgs<DType, IdType>& x, float (&v)[8], DType* out, int64_t elem,
                                          pos_t<IdType> lo, pos_t<IdType> hi) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (!isfinite(v[i])) {
      float s = 0.f;
      for (pos_t<IdType> p = lo; p < hi; ++p) s += message_at<Op>(x, p, elem + i);
      v[i] = s;
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

template <typename Op, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    vertex_sum(const OpArgs<DType, IdType> x, const TileWalk walk, const int64_t slabs, const int64_t heavy_degree) {
  using Pos = pos_t<IdType>;
  const Topology<IdType>& g = x.graph;
  const int lane = lane_id(), gq = lane >> 2, tq = lane & 3;
  const Pos num_dst = static_cast<Pos>(g.num_dst);
  int64_t unit;
  uint32_t tile;
  for (walk.first(global_warp(), unit, tile); unit < walk.units; walk.next(unit, tile)) {
    const Pos r0 = static_cast<Pos>(unit * kRows);
    // Row gq of the block (rows past the last are empty, at E); heavy rows count as empty here.
    const Pos lo = g.begin_pos(min(r0 + Pos(gq), num_dst));
    const Pos hi = g.begin_pos(min(r0 + Pos(gq) + 1, num_dst));
    const bool heavy = int64_t(hi - lo) > heavy_degree;
    const Pos member_lo = heavy ? hi : lo;
    // Bit 4n: row n is heavy. The positions are walked in runs of consecutive rows that are not.
    const unsigned heavy_rows = __ballot_sync(kFullMask, heavy) & 0x11111111u;
    for (int64_t slab = tile; slab < slabs; slab += walk.tiles) {
      const int64_t elem = slab * kSlab + 8 * gq;
      const DType* const a_lane = x.a + elem;
      float d[kTiles][4] = {};
      for (int r = 0; r < kRows;) {
        while (r < kRows && ((heavy_rows >> (4 * r)) & 1u)) ++r;
        if (r == kRows) break;
        int r_end = r + 1;
        while (r_end < kRows && !((heavy_rows >> (4 * r_end)) & 1u)) ++r_end;
        const Pos begin = shfl_pos(lo, 4 * r), end = shfl_pos(hi, 4 * (r_end - 1));
        r = r_end;
        // Lanes l and l + 16 hold position base + l's source row and weight, loaded one chunk
        // ahead (UGRAPH_TENSOR_AHEAD) or at the top of the chunk.
        auto indices = [&](Pos base, Pos& src, uint32_t& w) {
          const Pos q = base + Pos(lane & (kChunk - 1));
          const bool in = q < end;
          src = in ? static_cast<Pos>(x.a_rows.row(q)) : Pos(0);
          if constexpr (Op::use_rhs) {
            w = in ? bits_of(__ldg(x.b + int64_t(x.b_rows.row(q)) * x.b_stride)) : 0u;
          } else {
            w = bits_of(from_acc<DType>(1.f));
          }
        };
        Pos src_next = 0;
        uint32_t w_next = 0;
        if (UGRAPH_TENSOR_AHEAD) indices(begin, src_next, w_next);
        for (Pos base = begin; base < end; base += kChunk) {
          Pos src;
          uint32_t w;
          if (UGRAPH_TENSOR_AHEAD) {
            src = src_next;
            w = w_next;
            indices(base + kChunk, src_next, w_next);
          } else {
            indices(base, src, w);
          }
          // This lane's positions k = 2t, 2t + 1, 2t + 8, 2t + 9: their source rows' 16 bytes
          // (zeros past the run: a zero weight alone would not cancel an Inf there), and their
          // weights where they belong to row g.
          uint4 rows[4];
          uint32_t bk[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int k = 2 * tq + (i & 1) + 8 * (i >> 1);
            const Pos p = base + Pos(k);
            const Pos s = shfl_pos(src, k);
            const uint32_t wk = __shfl_sync(kFullMask, w, k);
            rows[i] = p < end ? __ldg(reinterpret_cast<const uint4*>(row_ptr(a_lane, s, x.a_row_bytes)))
                              : make_uint4(0, 0, 0, 0);
            bk[i] = p >= member_lo && p < hi && p < end ? wk : 0u;
          }
          const uint32_t b0 = bk[0] | (bk[1] << 16), b1 = bk[2] | (bk[3] << 16);
          const uint32_t r0w[4] = {rows[0].x, rows[0].y, rows[0].z, rows[0].w};
          const uint32_t r1w[4] = {rows[1].x, rows[1].y, rows[1].z, rows[1].w};
          const uint32_t r2w[4] = {rows[2].x, rows[2].y, rows[2].z, rows[2].w};
          const uint32_t r3w[4] = {rows[3].x, rows[3].y, rows[3].z, rows[3].w};
#pragma unroll
          for (int j = 0; j < kTiles; ++j) {
            const uint32_t a[4] = {__byte_perm(r0w[j], r1w[j], 0x5410), __byte_perm(r0w[j], r1w[j], 0x7632),
                                   __byte_perm(r2w[j], r3w[j], 0x5410), __byte_perm(r2w[j], r3w[j], 0x7632)};
            mma<DType>(d[j], a, b0, b1);
          }
        }
      }
      // Rows 2t and 2t + 1, whose sums this lane holds.
      const Pos lo_n[2] = {shfl_pos(lo, 8 * tq), shfl_pos(lo, 8 * tq + 4)};
      const Pos hi_n[2] = {shfl_pos(hi, 8 * tq), shfl_pos(hi, 8 * tq + 4)};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int n = 2 * tq + half;
        const Pos v = r0 + Pos(n);
        if (v >= num_dst || ((heavy_rows >> (4 * n)) & 1u)) continue;
        float out[8];
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          out[2 * j] = d[j][half];
          out[2 * j + 1] = d[j][2 + half];
        }
        store_row<Op>(x, out, row_ptr(x.c + elem, v, x.c_row_bytes), elem, lo_n[half], hi_n[half]);
      }
    }
  }
}

// Host side: the blocks of kRows rows, each row's slabs spread over up to `tiling` warps.
template <typename Op, typename DType, typename IdType>
void launch_vertex_sum(const UgParams& p, const OpArgs<DType, IdType>& x, int64_t heavy_degree, cudaStream_t stream) {
  const int64_t slabs = p.out_len / kSlab;
  const LaunchPlan plan = plan_launch(ceil_div(p.num_dst, kRows), std::min<int64_t>(p.tiling, slabs), kWarp);
  vertex_sum<Op, DType, IdType><<<plan.grid, kBlock, 0, stream>>>(x, plan.walk, slabs, heavy_degree);
}

}  // namespace tensor
}  // namespace ugraph
