// What every strategy shares: element conversions, read-only loads, the graph and operand
// addressing of params.h, launch geometry, the packed max/min keys, and CUDA error plumbing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ugraph/params.h"

// Returns the cudaError_t of EXPR from the enclosing function when it is not cudaSuccess.
#define UG_CUDA_TRY(EXPR)                      \
  do {                                         \
    const cudaError_t ug_err_ = (EXPR);        \
    if (ug_err_ != cudaSuccess) return ug_err_; \
  } while (0)

namespace ugraph {

constexpr int kBlock = 256;
constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kBlock / kWarp;
// Every kernel declares __launch_bounds__(kBlock, kMinBlocks). Without a minimum, ptxas spills
// loop-invariant state to local memory to reach the next occupancy step; with it, every kernel
// is free of spills (UGRAPH_PTXAS_VERBOSE=1 scripts/build_cuda_lib.sh reports them).
constexpr int kMinBlocks = 1;
constexpr unsigned kFullMask = 0xffffffffu;
// Grids stop growing here and the kernels' grid-stride loops take the rest; 2^28 threads is far
// past what any GPU keeps resident, so the cap only guards gridDim.x against its limit.
constexpr int64_t kMaxBlocks = int64_t(1) << 20;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Blocks of kBlock threads for `threads` threads (at least 1: callers skip empty launches).
inline unsigned grid_for(int64_t threads) {
  return static_cast<unsigned>(std::min(std::max<int64_t>(ceil_div(threads, kBlock), 1), kMaxBlocks));
}

__device__ __forceinline__ int64_t global_thread() { return int64_t(blockIdx.x) * kBlock + threadIdx.x; }
__device__ __forceinline__ int64_t thread_count() { return int64_t(gridDim.x) * kBlock; }
__device__ __forceinline__ int64_t global_warp() { return global_thread() / kWarp; }
__device__ __forceinline__ int64_t warp_count() { return int64_t(gridDim.x) * kWarpsPerBlock; }
__device__ __forceinline__ int lane_id() { return threadIdx.x & (kWarp - 1); }

// The grid-stride walk over units x tiles workers (threads, or warps), tile-minor: consecutive
// workers hold consecutive tiles of one unit. The host splits the grid's stride into units and
// tiles once, so the kernels neither divide in 64 bits (a slow subroutine call) nor hold the
// stride in registers; a worker's first index is below 2^28 (kMaxBlocks x kBlock) and splits
// with one 32-bit division.
struct TileWalk {
  int64_t units;
  uint32_t tiles;
  uint32_t unit_step, tile_step;

  __device__ __forceinline__ void first(int64_t worker, int64_t& unit, uint32_t& tile) const {
    unit = static_cast<uint32_t>(worker) / tiles;
    tile = static_cast<uint32_t>(worker) % tiles;
  }
  __device__ __forceinline__ bool more(int64_t unit, uint32_t) const { return unit < units; }
  __device__ __forceinline__ void next(int64_t& unit, uint32_t& tile) const {
    unit += unit_step;
    tile += tile_step;
    if (tile >= tiles) {
      tile -= tiles;
      ++unit;
    }
  }
};

// Grid and walk for units x tiles workers of `worker_threads` threads each (1 or kWarp).
struct LaunchPlan {
  unsigned grid;
  TileWalk walk;
};

inline LaunchPlan plan_launch(int64_t units, int64_t tiles, int worker_threads) {
  const unsigned grid = grid_for(units * tiles * worker_threads);
  const int64_t stride = int64_t(grid) * (kBlock / worker_threads);
  return LaunchPlan{grid, TileWalk{units, static_cast<uint32_t>(tiles), static_cast<uint32_t>(stride / tiles),
                                   static_cast<uint32_t>(stride % tiles)}};
}

// ---- element types ---------------------------------------------------------------------------
// Half types compute and accumulate in float and round once, when the result is stored.
template <typename DType> struct AccOf { using type = DType; };
template <> struct AccOf<__half> { using type = float; };
template <> struct AccOf<__nv_bfloat16> { using type = float; };
template <typename DType> using acc_t = typename AccOf<DType>::type;

template <typename DType>
constexpr bool is_half_v = std::is_same_v<DType, __half> || std::is_same_v<DType, __nv_bfloat16>;

__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename DType> __device__ __forceinline__ DType from_acc(acc_t<DType> x);
template <> __device__ __forceinline__ float from_acc<float>(float x) { return x; }
template <> __device__ __forceinline__ double from_acc<double>(double x) { return x; }
template <> __device__ __forceinline__ __half from_acc<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// A, B and every index array are read-only for the whole launch: load them through the
// read-only data cache.
template <typename DType>
__device__ __forceinline__ acc_t<DType> load(const DType* p) { return to_acc(__ldg(p)); }
__device__ __forceinline__ int64_t load_index(const int32_t* p) { return __ldg(p); }
__device__ __forceinline__ int64_t load_index(const int64_t* p) {
  return __ldg(reinterpret_cast<const long long*>(p));
}

// Warp shuffles of indices keep their width: one shuffle for int32, two for int64.
__device__ __forceinline__ int32_t shfl_index(int32_t v, int src) { return __shfl_sync(kFullMask, v, src); }
__device__ __forceinline__ int64_t shfl_index(int64_t v, int src) {
  return __shfl_sync(kFullMask, static_cast<long long>(v), src);
}

// ---- warps ------------------------------------------------------------------------------------
// How a warp's lanes cover output elements: `width` lanes per element, 32 / width elements
// side by side (a "chunk"). The lanes of an element split its K products, so width is 1 unless
// the edge op is a dot; a dot takes the power of two >= K, capped at 32.
//   - K = 1 (and every other op): lanes span 32 consecutive elements, as a warp should.
//   - u_dot_v (out_len 1, K = F): all 32 lanes split the F products, instead of one lane
//     summing them while 31 idle; the lanes also read consecutive addresses.
//   - per-head dots (K = 16, 8 heads): 2 heads per chunk, 16 lanes each.
// The shares are combined with an xor butterfly within each aligned group of width lanes.
struct LaneLayout {
  int width_log2;
  int64_t chunks;  // ceil(out_len / elements per chunk)

  __host__ __device__ __forceinline__ int width() const { return 1 << width_log2; }
  __host__ __device__ __forceinline__ int per_chunk() const { return kWarp >> width_log2; }
};

inline LaneLayout lane_layout(const UgParams& p) {
  int log2 = 0;
  if (p.edge_op == UG_DOT) {
    while ((int64_t(1) << log2) < p.reduce_size && log2 < 5) ++log2;
  }
  return LaneLayout{log2, ceil_div(p.out_len, kWarp >> log2)};
}

// Sum over each aligned group of `width` lanes; every lane of a group gets the same bits
// (each butterfly step adds the same two values in either order). `mask`: the lanes that make
// this call together, a whole number of groups.
template <typename T>
__device__ __forceinline__ T lane_group_sum(T v, int width, unsigned mask = kFullMask) {
  for (int m = width >> 1; m > 0; m >>= 1) v += __shfl_xor_sync(mask, v, m);
  return v;
}

// The index type of the team kernels' loops over positions, rows and operand rows: 32 bits for a
// 32-bit graph (fewer than 2^31 edges and nodes, so position + kInFlight still fits), where a
// clamp or a compare is one instruction and an address one IMAD.WIDE.U32, instead of the 64-bit
// sequences that made up most of those loops' instructions.
template <typename IdType>
using pos_t = std::conditional_t<sizeof(IdType) == 4, uint32_t, uint64_t>;

template <typename IdType>
__device__ __forceinline__ pos_t<IdType> load_pos(const IdType* p) {
  return static_cast<pos_t<IdType>>(load_index(p));
}

// Row `row` of an operand whose rows are `row_bytes` apart, from a lane's element in row 0.
template <typename DType, typename Pos>
__device__ __forceinline__ DType* row_ptr(DType* lane, Pos row, uint64_t row_bytes) {
  using Byte = std::conditional_t<std::is_const_v<DType>, const char, char>;
  return reinterpret_cast<DType*>(reinterpret_cast<Byte*>(lane) + static_cast<uint64_t>(row) * row_bytes);
}

// ---- the graph -------------------------------------------------------------------------------
template <typename IdType>
struct Topology {
  const IdType* indptr;
  const IdType* row;
  const IdType* eid;
  int64_t num_dst, num_edges;

  __device__ __forceinline__ int64_t begin(int64_t v) const { return load_index(indptr + v); }
  __device__ __forceinline__ int64_t end(int64_t v) const { return load_index(indptr + v + 1); }
  __device__ __forceinline__ int64_t dst(int64_t p) const { return load_index(row + p); }
  __device__ __forceinline__ int64_t edge(int64_t p) const { return eid ? load_index(eid + p) : p; }

  // The same in the team kernels' index type.
  using Pos = pos_t<IdType>;
  __device__ __forceinline__ Pos begin_pos(Pos v) const { return load_pos(indptr + v); }
  __device__ __forceinline__ Pos end_pos(Pos v) const { return load_pos(indptr + v + 1); }
  __device__ __forceinline__ Pos dst_pos(Pos p) const { return load_pos(row + p); }
  __device__ __forceinline__ Pos edge_pos(Pos p) const { return eid ? load_pos(eid + p) : p; }
};

// Which row of an operand position p reads: params.h's ia(p) or ib(p). Written as a select and
// one predicated load rather than a switch on the tensor type, so that the compiler can batch
// the loads of successive positions in the thread strategies' edge loops.
template <typename IdType>
struct OperandRows {
  const IdType* index;  // col for a src operand, row for dst, eid for edge (NULL: eid[p] == p)
  bool dst;             // a dst operand, whose row a vertex strategy knows without a load
  bool used;            // whether the edge op reads the operand; an unused one's arg is 0

  // The row at position p.
  __device__ __forceinline__ int64_t at(int64_t p) const { return index ? load_index(index + p) : p; }
  // The same where p's destination v is known.
  __device__ __forceinline__ int64_t at(int64_t p, int64_t v) const { return dst ? v : at(p); }

  // The same in the team kernels' index type.
  using Pos = pos_t<IdType>;
  __device__ __forceinline__ Pos row(Pos p) const { return index ? load_pos(index + p) : p; }
  __device__ __forceinline__ Pos row(Pos p, Pos v) const { return dst ? v : row(p); }
};

template <typename IdType>
OperandRows<IdType> operand_rows(const UgParams& p, int type, bool used) {
  const auto* col = static_cast<const IdType*>(p.col);
  const auto* row = static_cast<const IdType*>(p.row);
  const auto* eid = static_cast<const IdType*>(p.eid);
  if (!used) return OperandRows<IdType>{nullptr, false, false};
  return OperandRows<IdType>{type == UG_SRC ? col : type == UG_DST ? row : eid, type == UG_DST, true};
}

// ---- the operator ----------------------------------------------------------------------------
// UgParams as the kernels read it, passed by value.
template <typename DType, typename IdType>
struct OpArgs {
  Topology<IdType> graph;
  OperandRows<IdType> a_rows, b_rows;
  const DType* a;
  const DType* b;
  DType* c;
  IdType* arg_a;
  IdType* arg_b;
  bool wide_args;  // params.h's arg_bits 64 on a 32-bit graph: arg_a and arg_b hold int64_t
  const int64_t* a_off;
  const int64_t* b_off;
  int64_t a_stride, b_stride;
  uint64_t a_row_bytes, b_row_bytes, c_row_bytes;  // the strides in bytes, for row_ptr
  int64_t out_len, reduce_size;
  bool mean;  // gather mean: a sum divided by its row's degree where it is stored (mean_of)

  // What an aggregated sum of a row of `degree` positions stores: the sum, or for a mean the sum
  // divided by the degree (at least 1), as dgl.ops.gspmm divides it. A split row's partial sums
  // are each divided before they combine.
  __device__ __forceinline__ acc_t<DType> mean_of(acc_t<DType> sum, int64_t degree) const {
    return mean ? sum / static_cast<acc_t<DType>>(degree > 1 ? degree : 1) : sum;
  }

  // Offset of output element e's first value within a row of A (B): a_off[e]*K, or e*K.
  __device__ __forceinline__ int64_t a_elem(int64_t e) const {
    return (a_off ? load_index(a_off + e) : e) * reduce_size;
  }
  __device__ __forceinline__ int64_t b_elem(int64_t e) const {
    return (b_off ? load_index(b_off + e) : e) * reduce_size;
  }
  __device__ __forceinline__ const DType* a_at(int64_t ia, int64_t elem) const { return a + ia * a_stride + elem; }
  __device__ __forceinline__ const DType* b_at(int64_t ib, int64_t elem) const { return b + ib * b_stride + elem; }

  // Writes one aggregated output element and, for max/min, the operand rows of its winner.
  __device__ __forceinline__ void store(int64_t i, acc_t<DType> value, int64_t win_a, int64_t win_b) const {
    c[i] = from_acc<DType>(value);
    if (arg_a) store_arg(arg_a, i, win_a);
    if (arg_b) store_arg(arg_b, i, win_b);
  }

  // Element i of an arg: IdType, or int64_t where wide_args says so.
  __device__ __forceinline__ void store_arg(IdType* arg, int64_t i, int64_t operand_row) const {
    if (sizeof(IdType) == 4 && wide_args) {
      reinterpret_cast<int64_t*>(arg)[i] = operand_row;
    } else {
      arg[i] = static_cast<IdType>(operand_row);
    }
  }
};

template <typename DType, typename IdType>
OpArgs<DType, IdType> make_op_args(const UgParams& p) {
  OpArgs<DType, IdType> x;
  x.graph = Topology<IdType>{static_cast<const IdType*>(p.indptr), static_cast<const IdType*>(p.row),
                             static_cast<const IdType*>(p.eid), p.num_dst, p.num_edges};
  x.a = static_cast<const DType*>(p.a);
  x.b = static_cast<const DType*>(p.b);
  x.c = static_cast<DType*>(p.c);
  const bool aggregate = p.gather_op != UG_GATHER_NONE;
  x.arg_a = aggregate ? static_cast<IdType*>(p.arg_a) : nullptr;
  x.arg_b = aggregate ? static_cast<IdType*>(p.arg_b) : nullptr;
  x.wide_args = sizeof(IdType) == 4 && p.arg_bits == 64;
  x.a_off = p.a_off;
  x.b_off = p.b_off;
  x.a_stride = p.a_row_stride;
  x.b_stride = p.b_row_stride;
  x.a_row_bytes = static_cast<uint64_t>(p.a_row_stride) * sizeof(DType);
  x.b_row_bytes = static_cast<uint64_t>(p.b_row_stride) * sizeof(DType);
  x.c_row_bytes = static_cast<uint64_t>(p.out_len) * sizeof(DType);
  x.out_len = p.out_len;
  x.reduce_size = p.reduce_size;
  x.mean = p.gather_op == UG_MEAN;
  x.a_rows = operand_rows<IdType>(p, p.a_type, p.edge_op != UG_COPY_RHS);
  x.b_rows = operand_rows<IdType>(p, p.b_type, p.edge_op != UG_COPY_LHS);
  return x;
}

// ---- packed max/min keys for the edge strategies ---------------------------------------------
// One 64-bit word per output element, combined with atomicMax: the high 32 bits order the
// float value (complemented for min, so that the better value is always the larger key), the
// low 32 bits hold ~position, so that among equal values the first position in CSC order wins,
// as in a serial scan. 0 means "nothing won" (a real key never is 0: its low half is ~p with
// p < 2^32 - 1). Callers only pack values strictly better than the reduce zero, so NaN, which
// has no place in the order, is never packed.
template <bool kMin>
__device__ __forceinline__ uint32_t order_key(float v) {
  // -0 and +0 are equal to a serial scan; fold them so that the position decides between them
  // (a winning -0 therefore comes back as +0).
  const uint32_t u = __float_as_uint(v == 0.f ? 0.f : v);
  const uint32_t k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return kMin ? ~k : k;
}

template <bool kMin>
__device__ __forceinline__ float key_value(uint32_t k) {
  if (kMin) k = ~k;
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

template <bool kMin>
__device__ __forceinline__ unsigned long long pack_key(float value, int64_t pos) {
  return (static_cast<unsigned long long>(order_key<kMin>(value)) << 32) |
         static_cast<uint32_t>(~static_cast<uint32_t>(pos));
}

__device__ __forceinline__ int64_t key_position(unsigned long long key) {
  return static_cast<uint32_t>(~static_cast<uint32_t>(key));
}

}  // namespace ugraph
