// Team kernels: the bodies of warp_vertex and warp_edge for every edge op but a dot that is
// aggregated, and for every message creation (dots included: dot_message).
//
// A worker is a team of T lanes of one warp (T a power of two, 1..32, sized to the output row),
// and each lane owns kVec consecutive output elements: kVec = 16 bytes / sizeof(DType) where the
// operands allow 16-byte accesses (then every A, B and C access of a lane is one vector), else
// half that where they allow 8-byte ones, else 1 (with_vector_width).
// A team covers a slab of T * kVec elements; a wider output row has several slabs, which tile j
// of `tiles` takes as slabs j, j + tiles, .... So a narrow row packs 32 / T rows per warp instead
// of idling lanes, and a wide one keeps every lane on 16-byte accesses.
//
// Each lane keeps kInFlight positions' operand loads in flight before the first use, so that the
// latency of gathering a source row is paid once per kInFlight edges, not once per edge.
//
// team_vertex_*: a unit is `group` consecutive destination rows; each row's edges are walked in
//   CSC order, so there are no atomics and max/min find the first winner as a serial scan does.
// team_edge_*: a unit is about `group` consecutive positions in CSC order. Message creation cuts
//   them at multiples of `group` whatever rows they fall in; aggregation aligns them to rows
//   no longer than `group` (edge_aggregate.cuh's unit_start), so that only longer rows are
//   split. Either way every team does at most 2 * group positions however skewed the in-degrees
//   are. Aggregation folds each run of one row into registers and flushes it through
//   edge_aggregate.cuh: a run that holds its whole row is stored, the others combine atomically.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "common.cuh"
#include "edge_aggregate.cuh"
#include "functor.cuh"
#include "static_switch.h"

namespace ugraph {
namespace team {

constexpr int kInFlight = 4;

template <typename DType>
constexpr int kVecOf = 16 / static_cast<int>(sizeof(DType));

// The unsigned type of an 8- or 16-byte vector access.
template <int kBytes> struct RawOf;
template <> struct RawOf<8> { using type = uint2; };
template <> struct RawOf<16> { using type = uint4; };

// kVec values of DType at p: one 16-byte (or 8-byte) read-only load, or one scalar load
// when kVec == 1.
template <int kVec, typename DType>
__device__ __forceinline__ void load_vec(const DType* p, acc_t<DType> (&out)[kVec]) {
  if constexpr (kVec == 1) {
    out[0] = load(p);
  } else {
    using Raw = typename RawOf<kVec * sizeof(DType)>::type;
    const Raw raw = __ldg(reinterpret_cast<const Raw*>(p));
    DType vals[kVec];
    memcpy(vals, &raw, sizeof(raw));
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = to_acc(vals[k]);
  }
}

// kStream: a streaming store (st.global.cs), for rows written once and not read again soon, such
// as the E x F messages of message creation, which would otherwise evict the operand rows that
// the next positions gather from L2.
template <int kVec, bool kStream = false, typename DType>
__device__ __forceinline__ void store_vec(DType* p, const acc_t<DType> (&in)[kVec]) {
  if constexpr (kVec == 1) {
    if constexpr (kStream) {
      __stcs(p, from_acc<DType>(in[0]));
    } else {
      *p = from_acc<DType>(in[0]);
    }
  } else {
    using Raw = typename RawOf<kVec * sizeof(DType)>::type;
    DType vals[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) vals[k] = from_acc<DType>(in[k]);
    Raw raw;
    memcpy(&raw, vals, sizeof(raw));
    if constexpr (kStream) {
      __stcs(reinterpret_cast<Raw*>(p), raw);
    } else {
      *reinterpret_cast<Raw*>(p) = raw;
    }
  }
}

// Where one lane's kVec elements sit in row 0 of A and of B, as pointers (row_ptr moves them to
// a row). With kVec > 1, A is read as one vector at the lane's first element (no broadcast,
// aligned rows). B too when kGatherB is 0; otherwise B is broadcast (params.h's b_off_block) so
// that the lane's elements read kGatherB values of it, one for each kVec / kGatherB elements,
// such as u_mul_e's edge weight or a GAT head's attention: b points at the first value and b_hi
// at the second (try_width says where two values a lane pay). With kVec == 1 both follow
// the broadcast offsets.
template <int kVec, int kGatherB, typename DType>
struct LaneOffsets {
  static_assert(kGatherB >= 0 && kGatherB <= 2 && (kGatherB < 2 || kVec == 4));
  const DType* a;
  const DType* b;
  const DType* b_hi;

  template <typename IdType>
  __device__ __forceinline__ LaneOffsets(const OpArgs<DType, IdType>& x, int64_t first) {
    if constexpr (kVec == 1) {
      a = x.a + x.a_elem(first);
      b = x.b + x.b_elem(first);
    } else {
      a = x.a + first;
      b = x.b + (kGatherB ? x.b_elem(first) : first);
    }
    b_hi = kGatherB == 2 ? x.b + x.b_elem(first + kVec / 2) : b;
  }
};

// The messages of positions p .. p + kInFlight - 1 for one lane's elements, each position
// clamped to `last` (the caller drops the repeats), so that a run shorter than kInFlight still
// has all its loads in flight; ia/ib receive each position's operand rows. kRowKnown: the
// positions lie in destination row v, so a dst-typed operand needs no index load. Every index
// load is issued before the feature loads, and every feature load before the first use.
template <typename Op, bool kRowKnown, int kVec, int kGatherB, typename DType, typename IdType>
__device__ __forceinline__ void messages(const OpArgs<DType, IdType>& x, const LaneOffsets<kVec, kGatherB, DType>& off,
                                         pos_t<IdType> p, pos_t<IdType> last, pos_t<IdType> v,
                                         acc_t<DType> (&out)[kInFlight][kVec], pos_t<IdType> (&ia)[kInFlight],
                                         pos_t<IdType> (&ib)[kInFlight]) {
  using Acc = acc_t<DType>;
  constexpr int N = kInFlight;
#pragma unroll
  for (int u = 0; u < N; ++u) {
    const pos_t<IdType> q = min(p + u, last);
    ia[u] = Op::use_lhs ? (kRowKnown ? x.a_rows.row(q, v) : x.a_rows.row(q)) : 0;
    ib[u] = Op::use_rhs ? (kRowKnown ? x.b_rows.row(q, v) : x.b_rows.row(q)) : 0;
  }
  // A gathered B holds kGatherB values per position: the load units, not the bytes, bound those ops.
  constexpr int kHeldB = kGatherB ? kGatherB : kVec;
  Acc a[N][kVec], b[N][kHeldB];
#pragma unroll
  for (int u = 0; u < N; ++u) {
    if constexpr (Op::use_lhs) load_vec<kVec>(row_ptr(off.a, ia[u], x.a_row_bytes), a[u]);
    if constexpr (Op::use_rhs) {
      const DType* row = row_ptr(off.b, ib[u], x.b_row_bytes);
      if constexpr (kGatherB > 0) {
        b[u][0] = load(row);
        if constexpr (kGatherB == 2) b[u][1] = load(row_ptr(off.b_hi, ib[u], x.b_row_bytes));
      } else {
        load_vec<kVec>(row, b[u]);
      }
    }
  }
#pragma unroll
  for (int u = 0; u < N; ++u) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int kb = kGatherB ? k / (kVec / kGatherB) : k;
      out[u][k] = Op::Apply(Op::use_lhs ? a[u][k] : Acc(0), Op::use_rhs ? b[u][kb] : Acc(0));
    }
  }
}

// One lane's accumulators over a run of positions of one row. For max/min, each element's
// winner, -1 while nothing beat the reduce zero: kRows, its operand rows (win the row of A,
// win_b that of B: what arg_a and arg_b receive, taken from the index loads the messages made
// anyway); otherwise its position (which the edge strategies' packed keys order by). Rows and
// positions both fit IdType (an int32 graph has fewer than 2^31 edges), which keeps each
// element's bookkeeping to one 32-bit select on int32 graphs.
template <typename Reduce, int kVec, typename DType, typename IdType, bool kRows>
struct Fold {
  static constexpr bool kArg = Reduce::require_arg;
  acc_t<DType> acc[kVec];
  IdType win[kArg ? kVec : 1];
  IdType win_b[kArg && kRows ? kVec : 1];

  __device__ __forceinline__ Fold() {
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] = Reduce::zero();
    if constexpr (kArg) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) win[k] = -1;
      if constexpr (kRows) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) win_b[k] = -1;
      }
    }
  }

  // Folds positions [p, end) of destination row v, kInFlight at a time.
  template <typename Op, int kGatherB>
  __device__ __forceinline__ void run(const OpArgs<DType, IdType>& x, const LaneOffsets<kVec, kGatherB, DType>& off,
                                      pos_t<IdType> p, pos_t<IdType> end, pos_t<IdType> v) {
    for (; p < end; p += kInFlight) {
      acc_t<DType> m[kInFlight][kVec];
      pos_t<IdType> ia[kInFlight], ib[kInFlight];
      messages<Op, true>(x, off, p, end - 1, v, m, ia, ib);
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        if (p + u < end) add(m[u], kRows ? ia[u] : p + u, ib[u]);
      }
    }
  }

  __device__ __forceinline__ void add(const acc_t<DType> (&m)[kVec], pos_t<IdType> w, pos_t<IdType> w_b) {
    // Converted once per position, outside the per-element selects.
    const IdType win_now = static_cast<IdType>(w), win_now_b = static_cast<IdType>(w_b);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const bool won = Reduce::Call(acc[k], m[k]);
      if constexpr (kArg) {
        if (won) {
          win[k] = win_now;
          if constexpr (kRows) win_b[k] = win_now_b;
        }
      }
    }
  }

  // A mean's sums divided by the degree of their row, before they are stored or flushed; the
  // other gathers keep theirs. One division per lane and row, then a multiply per element: on
  // rows of a few edges, a division per element cost the mean 4% over the sum (session 17), for a
  // last bit against OpArgs::mean_of's exact quotient.
  __device__ __forceinline__ void divide_mean(const OpArgs<DType, IdType>& x, int64_t degree) {
    if constexpr (!kArg) {
      if (x.mean) {
        const acc_t<DType> inverse = acc_t<DType>(1) / static_cast<acc_t<DType>>(degree > 1 ? degree : 1);
#pragma unroll
        for (int k = 0; k < kVec; ++k) acc[k] *= inverse;
      }
    }
  }
};

// An aggregated output row's kVec elements at p, as a streaming store (st.global.cs): this launch
// never reads C again, and C's rows, evicted first, leave L2 to the source rows that later
// positions gather. On an H100 (session 22, same-run A/B of the warp strategies' sums and
// max/min): 1.013-1.020x where the kernel takes over 50 us, 1.03x below.
template <int kVec, typename DType>
__device__ __forceinline__ void store_out(DType* p, const acc_t<DType> (&in)[kVec]) {
  store_vec<kVec, true>(p, in);
}

// kVec operand rows (-1: nothing won, stored as 0) into arg at p: one vector store when the
// rows' bytes are a multiple of 16 (p is then aligned to them: see with_vector_width). Streaming
// stores, as C's (store_out).
template <int kVec, typename IdType>
__device__ __forceinline__ void store_rows(IdType* p, const IdType (&rows)[kVec]) {
  constexpr int kBytes = kVec * static_cast<int>(sizeof(IdType));
  if constexpr (kBytes % 16 == 0) {
    IdType ids[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) ids[k] = rows[k] < 0 ? 0 : rows[k];
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      uint4 raw;
      memcpy(&raw, reinterpret_cast<const char*>(ids) + 16 * i, sizeof(raw));
      __stcs(reinterpret_cast<uint4*>(p) + i, raw);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) __stcs(p + k, rows[k] < 0 ? IdType(0) : rows[k]);
  }
}

// kVec operand rows into arg from element `out` on (store_rows), as int64_t where the params ask
// a 32-bit graph for wide args (OpArgs::wide_args).
template <int kVec, typename DType, typename IdType>
__device__ __forceinline__ void store_arg_rows(const OpArgs<DType, IdType>& x, IdType* arg, int64_t out,
                                               const IdType (&rows)[kVec]) {
  if constexpr (sizeof(IdType) == 4) {
    if (x.wide_args) {
      int64_t wide[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) wide[k] = rows[k];
      store_rows<kVec>(reinterpret_cast<int64_t*>(arg) + out, wide);
      return;
    }
  }
  store_rows<kVec>(arg + out, rows);
}

// kVec winners' operand rows into arg from element `out` on, from their positions (-1, nothing
// won: row 0).
template <int kVec, typename DType, typename IdType>
__device__ __forceinline__ void store_winner_rows(const OpArgs<DType, IdType>& x, IdType* arg, int64_t out,
                                                  const OperandRows<IdType>& rows, const IdType (&win)[kVec]) {
  IdType ids[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) ids[k] = win[k] < 0 ? IdType(-1) : static_cast<IdType>(rows.at(win[k]));
  store_arg_rows<kVec>(x, arg, out, ids);
}

// Host side: lanes per team and slabs per row for kVec-wide lanes: as many lanes as the row has
// vectors, at most 32, or, cut into `tiling` slabs (a tile-major walk, below), as many as a
// slab's share has: tiling 4 at F = 256 in float32 gives four slabs of 16 lanes, not two of 32.
struct Layout {
  int lanes_log2;
  int64_t slabs;
};

inline Layout layout(int64_t out_len, int vec, int64_t tiling) {
  const int64_t vectors = ceil_div(out_len, vec);
  const int64_t share = ceil_div(vectors, std::max<int64_t>(tiling, 1));
  int log2 = 0;
  while ((int64_t(1) << log2) < share && log2 < 5) ++log2;
  return Layout{log2, ceil_div(vectors, int64_t(1) << log2)};
}

// The team kernels walk units x tiles in one of two orders, each its own instantiation (so the
// common one compiles exactly as it would alone):
//   unit-major (TileWalk): consecutive workers hold consecutive tiles of one unit, so the teams
//     of a unit run side by side and fetch each gathered row whole at about the same time;
//   tile-major (TileMajorWalk): worker w takes tile w / units and unit w % units, so the teams
//     resident at any moment read one slab of many rows: the grid's working set in L2 is one
//     slab's share of the gathered rows (tile_major_fits says when that pays).
// As in TileWalk, a worker's first index is below 2^28 and splits with 32-bit arithmetic, and
// the host splits the grid's stride.
struct TileMajorWalk {
  int64_t units;
  uint32_t tiles;
  int64_t unit_step;
  uint32_t tile_step;

  __device__ __forceinline__ void first(int64_t worker, int64_t& unit, uint32_t& tile) const {
    if (worker < units) {
      unit = worker;
      tile = 0;
    } else {  // units < worker < 2^28
      unit = static_cast<uint32_t>(worker) % static_cast<uint32_t>(units);
      tile = static_cast<uint32_t>(worker) / static_cast<uint32_t>(units);
    }
  }
  __device__ __forceinline__ bool more(int64_t, uint32_t tile) const { return tile < tiles; }
  __device__ __forceinline__ void next(int64_t& unit, uint32_t& tile) const {
    unit += unit_step;
    tile += tile_step;
    if (unit >= units) {
      unit -= units;
      ++tile;
    }
  }
};

// Host side: calls f(grid, walk) for units x min(tiling, slabs) teams of 2^lanes_log2 lanes,
// walking tile-major or unit-major.
template <typename F>
void with_walk(int64_t units, int64_t tiling, int64_t slabs, int lanes_log2, bool tile_major, F&& f) {
  const int64_t tiles = std::min(tiling, slabs);
  if (!tile_major) {
    const LaunchPlan plan = plan_launch(units, tiles, 1 << lanes_log2);
    f(plan.grid, plan.walk);
    return;
  }
  const unsigned grid = grid_for((units * tiles) << lanes_log2);
  const int64_t stride = int64_t(grid) * (kBlock >> lanes_log2);
  const int64_t split = std::max<int64_t>(units, 1);  // no launch follows for zero units
  f(grid, TileMajorWalk{units, static_cast<uint32_t>(tiles), stride % split, static_cast<uint32_t>(stride / split)});
}

// Host side: an attribute of the current device, asked once per device.
template <cudaDeviceAttr kAttr>
int64_t device_attribute() {
  constexpr int kDevices = 64;
  static std::atomic<int64_t> cached[kDevices] = {};
  int device = 0, value = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return 0;
  int64_t known = cached[device].load(std::memory_order_relaxed);
  if (known == 0 && cudaDeviceGetAttribute(&value, kAttr, device) == cudaSuccess) {
    known = value;
    cached[device].store(known, std::memory_order_relaxed);
  }
  return known;
}

inline int64_t l2_bytes() { return device_attribute<cudaDevAttrL2CacheSize>(); }

// Host side: whether a tiling past 1 walks tile-major: where the source rows that the positions
// gather (a src-typed A or B, read at random, each by several edges) outgrow half the L2 while
// one slab's share of them fits in it, and a slab still holds kMinSlabBytes of each row. Measured
// on an H100 at F = 256 in float32 (bench/NOTES.md, session 14): artist (52 MB of rows)
// 308 -> 242 us at tiling 2 and soc-BlogCatalog (91 MB) 558 -> 339 us at tiling 4, where rows
// fetched whole keep missing L2. Where the share does not fit (343 MB and up) the unit-major walk
// is 3-14% faster; on slabs of 64 bytes (F = 64 in float16, tiling 2) tile-major was 1.4x slower;
// on graphs whose rows fit L2 anyway the order matters little. selection/rules.py's l2_tiling
// picks tilings by the same test.
constexpr int64_t kMinSlabBytes = 256;

template <typename DType>
bool tile_major_fits(const UgParams& p) {
  if (p.tiling <= 1) return false;
  const bool lhs = p.edge_op != UG_COPY_RHS, rhs = p.edge_op != UG_COPY_LHS;
  const int64_t elems = (lhs && p.a_type == UG_SRC ? p.a_len : 0) + (rhs && p.b_type == UG_SRC ? p.b_len : 0);
  const int64_t gathered = p.num_src * elems * static_cast<int64_t>(sizeof(DType));
  const int64_t row = p.out_len * static_cast<int64_t>(sizeof(DType));
  const int64_t l2 = l2_bytes();
  return l2 > 0 && 2 * gathered > l2 && 2 * gathered <= int64_t(p.tiling) * l2 && row >= kMinSlabBytes * p.tiling;
}

// This lane's place in its team, and the team's worker index.
__device__ __forceinline__ int team_lane(int lanes_log2) { return threadIdx.x & ((1 << lanes_log2) - 1); }
__device__ __forceinline__ int64_t team_index(int lanes_log2) { return global_thread() >> lanes_log2; }

// Heavy rows of team_vertex aggregation. A team folds its rows one after another, each a chain
// of dependent loads kInFlight positions long, so a row many times longer than the others holds
// up its warp and, on a skewed graph, the whole kernel: a hub row of 1,600 edges is 400 round
// trips to L2 for one team while every other team is done. A row longer than `degree`
// (heavy_rows below) is instead cut into one contiguous chunk per team of a whole block; the
// chunks' accumulators combine in chunk order (shuffles within a warp, then shared memory across
// the block's warps), so that max/min keep the first winner of a serial scan and a sum adds in one
// fixed order (the same bits every run). A kernel of its own runs them before the team walk,
// which skips them: in the walk's kernel, the combining would cost every launch registers
// (+6 a kernel on average, up to +24 for a max). Its blocks take the (row, slab) pairs of params.h's
// long_rows list, longest first, one at a time, until the rows are no longer heavy.
struct HeavyRows {
  int64_t degree;   // rows longer than this are heavy (INT64_MAX: none)
  unsigned blocks;  // blocks of vertex_heavy_rows (0: none)
  size_t shared_bytes;
  const void* rows;  // params.h's long_rows: every heavy row is among them
  int64_t count;
};

// Host side: the length past which a row is heavy. A row is a straggler when its chain is several
// times what each team resident on the GPU does on average: more than UG_LONG_ROW positions,
// kHeavyFactor times E over the resident teams (about half of the GPU's warps, each holding
// 32 / lanes teams) and kHeavyFactor times a unit's `group` rows of average degree. Only where the
// graph's longest row (params.h's max_degree) passes kHeavyLaunch times it is the heavy rows'
// kernel launched, with up to kHeavyBlocksPerSm blocks per SM: on a small graph its launch costs
// a few microseconds, more than a row a few times the bound saves (H100, session 18: citeseer,
// longest row 34 at a bound of 32, 7.2 -> 10.3 us; ds-karate_deezer, 1.5x its bound, 0.83x).
constexpr int64_t kHeavyLaunch = 3;
constexpr int64_t kHeavyFactor = 4;
constexpr int64_t kResidentWarpsPerSm = 32;
constexpr int64_t kHeavyBlocksPerSm = 8;

// The heavy blocks' shared memory: per warp, the accumulators (and winners) of its first team,
// each array padded to 16 bytes.
template <typename Reduce, int kVec, typename DType, typename IdType>
struct HeavyShared {
  static constexpr bool kArg = Reduce::require_arg;
  static constexpr size_t pad(size_t n) { return (n + 15) / 16 * 16; }
  static constexpr size_t kSlots = kWarpsPerBlock * kWarp * kVec;  // a warp's first team: at most 32 lanes
  static constexpr size_t kAcc = 0;
  static constexpr size_t kWin = kAcc + pad(kSlots * sizeof(acc_t<DType>));
  static constexpr size_t kWinB = kWin + (kArg ? pad(kSlots * sizeof(IdType)) : 0);
  static constexpr size_t kBytes = kWinB + (kArg ? pad(kSlots * sizeof(IdType)) : 0);
};

template <typename Reduce, int kVec, typename DType, typename IdType>
HeavyRows heavy_rows(const UgParams& p, int lanes_log2, int64_t layout_slabs) {
  const HeavyRows none{INT64_MAX, 0, 0, nullptr, 0};
  if (p.max_degree <= UG_LONG_ROW || !p.long_rows || p.num_long_rows == 0) return none;
  const int64_t sms = device_attribute<cudaDevAttrMultiProcessorCount>();
  const int64_t teams = std::max<int64_t>(sms * kResidentWarpsPerSm * (int64_t(kWarp) >> lanes_log2), 1);
  const int64_t average = ceil_div(p.num_edges, p.num_dst);  // launch_vertex returns first where num_dst is 0
  const int64_t degree = std::max({int64_t(UG_LONG_ROW), kHeavyFactor * ceil_div(p.num_edges, teams),
                                   kHeavyFactor * p.grouping * average});
  if (p.max_degree <= kHeavyLaunch * degree) return none;
  const int64_t items = p.num_long_rows * layout_slabs;
  const auto blocks = static_cast<unsigned>(std::min(items, std::max<int64_t>(sms, 1) * kHeavyBlocksPerSm));
  return HeavyRows{degree, blocks, HeavyShared<Reduce, kVec, DType, IdType>::kBytes, p.long_rows, p.num_long_rows};
}

// Folds the accumulators of a later chunk (acc, win, win_b) into f, the fold of the chunks before
// it: a sum adds; max/min take the later one only where it strictly wins, as a serial scan would.
template <typename Reduce, typename F, typename Acc, typename Id>
__device__ __forceinline__ void merge_later(F& f, int k, Acc acc, Id win, Id win_b) {
  if constexpr (!Reduce::require_arg) {
    f.acc[k] += acc;
  } else if (Reduce::Call(f.acc[k], acc)) {
    f.win[k] = win;
    f.win_b[k] = win_b;
  }
}

// Folds the accumulators of an earlier chunk (max/min) into f, the fold of the chunk after it:
// f's own values stay only where they strictly win, as a serial scan would.
template <typename Reduce, typename F, typename Acc, typename Id>
__device__ __forceinline__ void merge_earlier(F& f, int k, Acc acc, Id win, Id win_b) {
  Acc earlier = acc;
  if (!Reduce::Call(earlier, f.acc[k])) {
    f.acc[k] = acc;
    f.win[k] = win;
    f.win_b[k] = win_b;
  }
}

// Stores a whole row's fold at its lane's elements from `first` on: C, and for max/min the
// winners' operand rows (a vertex fold tracks rows).
template <typename Op, typename Reduce, int kVec, typename DType, typename IdType>
__device__ __forceinline__ void store_row(const OpArgs<DType, IdType>& x, const Fold<Reduce, kVec, DType, IdType, true>& f,
                                          int64_t v, int64_t first) {
  const int64_t out = v * x.out_len + first;
  store_out<kVec>(x.c + out, f.acc);
  if constexpr (Reduce::require_arg) {
    // The validator refuses an arg for an operand the op does not read.
    if (Op::use_lhs && x.arg_a) store_arg_rows<kVec>(x, x.arg_a, out, f.win);
    if (Op::use_rhs && x.arg_b) store_arg_rows<kVec>(x, x.arg_b, out, f.win_b);
  }
}

template <typename Op, typename Reduce, int kVec, int kGatherB, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    vertex_heavy_rows(const OpArgs<DType, IdType> x, const int lanes_log2, const int64_t slabs, const HeavyRows heavy) {
  using Pos = pos_t<IdType>;
  using Acc = acc_t<DType>;
  using Shared = HeavyShared<Reduce, kVec, DType, IdType>;
  constexpr bool kArg = Reduce::require_arg;
  extern __shared__ __align__(16) unsigned char heavy_shared[];
  Acc* const part_acc = reinterpret_cast<Acc*>(heavy_shared + Shared::kAcc);
  IdType* const part_win = reinterpret_cast<IdType*>(heavy_shared + Shared::kWin);
  IdType* const part_win_b = reinterpret_cast<IdType*>(heavy_shared + Shared::kWinB);
  const Topology<IdType>& g = x.graph;
  const IdType* const long_rows = static_cast<const IdType*>(heavy.rows);
  const int lane = lane_id(), warp = threadIdx.x / kWarp;
  const int lanes = 1 << lanes_log2, t = lane & (lanes - 1);
  const int64_t team = threadIdx.x >> lanes_log2, teams = kBlock >> lanes_log2;  // chunk order
  const int64_t slab_elems = int64_t(kVec) << lanes_log2;
  // Items are (row, slab) pairs, a row's slabs side by side: the blocks of one row run at once.
  for (int64_t item = blockIdx.x; item < heavy.count * slabs; item += gridDim.x) {
    const Pos v = static_cast<Pos>(long_rows[item / slabs]);
    const int64_t slab = item % slabs;
    const Pos begin = g.begin_pos(v), end = g.end_pos(v);
    if (int64_t(end - begin) <= heavy.degree) break;  // longest first: the rest are no longer heavy
    const int64_t chunk = (int64_t(end - begin) + teams - 1) / teams;
    const Pos p0 = static_cast<Pos>(min64(end, begin + chunk * team));
    const Pos p1 = static_cast<Pos>(min64(end, p0 + chunk));
    const int64_t first = slab * slab_elems + int64_t(t) * kVec;
    const bool active = first < x.out_len;
    const LaneOffsets<kVec, kGatherB, DType> off(x, active ? first : 0);
    Fold<Reduce, kVec, DType, IdType, true> f;
    f.template run<Op>(x, off, p0, p1, v);
    // Within the warp: teams 2^j apart pair up, the lower one holding the earlier chunk.
    for (int step = lanes; step < kWarp; step <<= 1) {
      const bool later = lane & step;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const Acc acc = __shfl_xor_sync(kFullMask, f.acc[k], step);
        if constexpr (!kArg) {
          f.acc[k] += acc;  // commutative: both lanes of a pair hold the same bits
        } else {
          const IdType win = __shfl_xor_sync(kFullMask, f.win[k], step);
          const IdType win_b = __shfl_xor_sync(kFullMask, f.win_b[k], step);
          if (later) {
            merge_earlier<Reduce>(f, k, acc, win, win_b);
          } else {
            merge_later<Reduce>(f, k, acc, win, win_b);
          }
        }
      }
    }
    // Across the warps, in order, by the first team of warp 0.
    if (warp > 0 && lane < lanes) {
      const int slot = (warp * kWarp + t) * kVec;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        part_acc[slot + k] = f.acc[k];
        if constexpr (kArg) {
          part_win[slot + k] = f.win[k];
          part_win_b[slot + k] = f.win_b[k];
        }
      }
    }
    __syncthreads();
    if (warp == 0 && lane < lanes) {
      for (int w = 1; w < kWarpsPerBlock; ++w) {
        const int slot = (w * kWarp + t) * kVec;
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          merge_later<Reduce>(f, k, part_acc[slot + k], kArg ? part_win[slot + k] : IdType(0),
                              kArg ? part_win_b[slot + k] : IdType(0));
        }
      }
      if (active) {
        if (x.mean) f.divide_mean(x, end - begin);
        store_row<Op>(x, f, v, first);
      }
    }
    __syncthreads();  // the slots are written again by the block's next item
  }
}

template <typename Op, typename Reduce, int kVec, int kGatherB, typename DType, typename IdType, typename Walk>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    vertex_aggregate(const OpArgs<DType, IdType> x, const Walk walk, const int group, const int lanes_log2,
                     const int64_t slabs, const int64_t heavy_degree) {
  const Topology<IdType>& g = x.graph;
  const int64_t slab_elems = int64_t(kVec) << lanes_log2;
  const int64_t lane_first = int64_t(team_lane(lanes_log2)) * kVec;
  int64_t unit;
  uint32_t tile;
  for (walk.first(team_index(lanes_log2), unit, tile); walk.more(unit, tile); walk.next(unit, tile)) {
    const auto v_begin = static_cast<pos_t<IdType>>(unit * group);
    const auto v_end = static_cast<pos_t<IdType>>(min64(unit * group + group, g.num_dst));
    for (int64_t slab = tile; slab < slabs; slab += walk.tiles) {
      const int64_t first = slab * slab_elems + lane_first;
      const bool active = first < x.out_len;
      // An idle lane reads element 0 and discards it: the loads stay unconditional.
      const LaneOffsets<kVec, kGatherB, DType> off(x, active ? first : 0);
      for (pos_t<IdType> v = v_begin; v < v_end; ++v) {
        const pos_t<IdType> begin = g.begin_pos(v), end = g.end_pos(v);
        if (int64_t(end - begin) > heavy_degree) continue;  // vertex_heavy_rows's
        Fold<Reduce, kVec, DType, IdType, true> f;
        f.template run<Op>(x, off, begin, end, v);
        if (!active) continue;
        // The row's bounds are loaded again (L1 hits) rather than held through the fold, which
        // would cost every sum the registers.
        if (x.mean) f.divide_mean(x, g.end_pos(v) - g.begin_pos(v));
        store_row<Op>(x, f, v, first);
      }
    }
  }
}

// Blocks an SM that edge_aggregate is compiled for: 5 (48 registers) for the float32 sums on int32
// graphs but a division's, which fit there without spilling; the others keep kMinBlocks. Against
// kMinBlocks in one run (H100, the suite's edge-strategy cases, session 27): a weight or a GAT
// head read by edge id (56 registers before) 1.019x and 1.014x, up to 1.10x, the others within
// noise; the half and float64 folds and max/min over two operands spill at 48.
template <typename Op, typename Reduce, typename DType, typename IdType>
constexpr int kEdgeMinBlocks = sizeof(DType) == 4 && sizeof(IdType) == 4 && !Reduce::require_arg &&
                                       !std::is_same_v<Op, binary::Div<DType>>
                                   ? 5
                                   : kMinBlocks;

template <typename Op, typename Reduce, int kVec, int kGatherB, typename DType, typename IdType, typename Walk>
__global__ void __launch_bounds__(kBlock, kEdgeMinBlocks<Op, Reduce, DType, IdType>)
    edge_aggregate(const OpArgs<DType, IdType> x, const Walk walk, const int group, const int lanes_log2,
                   const int64_t slabs, const EdgeSink<Reduce, DType> sink) {
  using Sink = EdgeSink<Reduce, DType>;
  const Topology<IdType>& g = x.graph;
  const int64_t slab_elems = int64_t(kVec) << lanes_log2;
  const int64_t lane_first = int64_t(team_lane(lanes_log2)) * kVec;
  int64_t unit;
  uint32_t tile;
  for (walk.first(team_index(lanes_log2), unit, tile); walk.more(unit, tile); walk.next(unit, tile)) {
    const auto p_begin = static_cast<pos_t<IdType>>(unit_start(g, unit, group));
    const auto p_end = static_cast<pos_t<IdType>>(unit_start(g, unit + 1, group));
    for (int64_t slab = tile; slab < slabs; slab += walk.tiles) {
      const int64_t first = slab * slab_elems + lane_first;
      const bool active = first < x.out_len;
      const LaneOffsets<kVec, kGatherB, DType> off(x, active ? first : 0);
      for (pos_t<IdType> p = p_begin; p < p_end;) {
        const pos_t<IdType> v = g.dst_pos(p);
        const pos_t<IdType> row_begin = g.begin_pos(v), row_end = g.end_pos(v);
        const pos_t<IdType> run_end = min(row_end, p_end);
        Fold<Reduce, kVec, DType, IdType, false> f;
        f.template run<Op>(x, off, p, run_end, v);
        p = run_end;
        if (!active) continue;
        f.divide_mean(x, row_end - row_begin);
        const int64_t out = int64_t(v) * x.out_len + first;
        if (!row_split(row_end - row_begin, group)) {  // the run is the whole row: C directly
          store_out<kVec>(x.c + out, f.acc);
          if constexpr (Sink::kPacked) {
            // The winners' operand rows from their positions (f.acc holds the reduce zero where
            // nothing won, and the row is then 0).
            if (Op::use_lhs && x.arg_a) store_winner_rows<kVec>(x, x.arg_a, out, x.a_rows, f.win);
            if (Op::use_rhs && x.arg_b) store_winner_rows<kVec>(x, x.arg_b, out, x.b_rows, f.win);
          }
          continue;
        }
        if constexpr (Sink::kPacked) {
          sink.flush_partial_keys(out, f.acc, f.win);
        } else {
          sink.flush_partial_sum(out, f.acc);
        }
      }
    }
  }
}

// Message creation: every position's message row is written to C's row of its edge id.
// kByRow: units are destination rows (team_vertex), else runs of positions (team_edge).
template <typename Op, bool kByRow, int kVec, int kGatherB, typename DType, typename IdType, typename Walk>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    message(const OpArgs<DType, IdType> x, const Walk walk, const int group, const int lanes_log2,
            const int64_t slabs) {
  const Topology<IdType>& g = x.graph;
  const int64_t slab_elems = int64_t(kVec) << lanes_log2;
  const int64_t lane_first = int64_t(team_lane(lanes_log2)) * kVec;
  const int64_t items = kByRow ? g.num_dst : g.num_edges;
  int64_t unit;
  uint32_t tile;
  for (walk.first(team_index(lanes_log2), unit, tile); walk.more(unit, tile); walk.next(unit, tile)) {
    const auto i_begin = static_cast<pos_t<IdType>>(unit * group);
    const auto i_end = static_cast<pos_t<IdType>>(min64(unit * group + group, items));
    for (int64_t slab = tile; slab < slabs; slab += walk.tiles) {
      const int64_t first = slab * slab_elems + lane_first;
      const bool active = first < x.out_len;
      const LaneOffsets<kVec, kGatherB, DType> off(x, active ? first : 0);
      DType* const c = x.c + first;
      // Positions [p, end); v is their destination row when kByRow, else unknown (unused).
      auto write = [&](pos_t<IdType> p, pos_t<IdType> end, pos_t<IdType> v) {
        for (; p < end; p += kInFlight) {
          pos_t<IdType> rows[kInFlight];
#pragma unroll
          for (int u = 0; u < kInFlight; ++u) rows[u] = g.edge_pos(min(p + u, end - 1));
          acc_t<DType> m[kInFlight][kVec];
          pos_t<IdType> ia[kInFlight], ib[kInFlight];
          messages<Op, kByRow>(x, off, p, end - 1, v, m, ia, ib);
          if (active) {
#pragma unroll
            for (int u = 0; u < kInFlight; ++u) {
              if (p + u < end) store_vec<kVec, true>(row_ptr(c, rows[u], x.c_row_bytes), m[u]);
            }
          }
        }
      };
      if constexpr (kByRow) {
        for (pos_t<IdType> v = i_begin; v < i_end; ++v) write(g.begin_pos(v), g.end_pos(v), v);
      } else {
        write(i_begin, i_end, 0);
      }
    }
  }
}

// ---- dot messages (u_dot_v and per-head dots) ---------------------------------------------
// Output element h of a position is the sum of K products over head h's slices of A and B. A
// head's K values are S = K / kVec vectors (kVec = 1 where K, the broadcast or the alignment do
// not allow 16 bytes), read by L lanes (L = the power of two >= S, at most 32), R = ceil(S / L)
// vectors each; a team of T lanes holds T / L heads side by side, T = L x (the power of two >=
// heads), at most 32. So u_dot_v at F = 64 in float32 takes 16 lanes, one vector of A and one of
// B each, two positions per warp; 8 heads of 8 take 16 lanes, two per head. The lanes of a head
// add their partial sums by an xor butterfly inside the team (the team's own shuffle mask: the
// teams of one warp walk different units). Heads past the slab's T / L are further slabs, which
// tile j takes as slabs j, j + tiles, ....
struct DotLayout {
  int lanes_log2;  // log2 T
  int head_log2;   // log2 L
  int reps;        // R
  int64_t vectors; // S
  int64_t slabs;   // ceil(heads / (T / L))
};

inline DotLayout dot_layout(int64_t heads, int64_t k, int vec) {
  const int64_t s = ceil_div(k, vec);
  int l = 0;
  while ((int64_t(1) << l) < s && l < 5) ++l;
  int h = 0;
  while ((int64_t(1) << h) < heads && l + h < 5) ++h;
  return DotLayout{l + h, l, static_cast<int>(ceil_div(s, int64_t(1) << l)), s, ceil_div(heads, int64_t(1) << h)};
}

// The lanes of this lane's team, as a shuffle mask.
__device__ __forceinline__ unsigned team_mask(int lanes_log2) {
  const int t = 1 << lanes_log2;
  return t == kWarp ? kFullMask : ((1u << t) - 1u) << (lane_id() & ~(t - 1));
}

template <bool kByRow, int kVec, typename DType, typename IdType, typename Walk>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    dot_message(const OpArgs<DType, IdType> x, const Walk walk, const int group, const DotLayout d) {
  using Acc = acc_t<DType>;
  constexpr int N = kInFlight;
  const Topology<IdType>& g = x.graph;
  const int t = team_lane(d.lanes_log2);
  const int j = t & ((1 << d.head_log2) - 1);  // this lane's place among its head's lanes
  const unsigned mask = team_mask(d.lanes_log2);
  const int64_t items = kByRow ? g.num_dst : g.num_edges;
  int64_t unit;
  uint32_t tile;
  for (walk.first(team_index(d.lanes_log2), unit, tile); walk.more(unit, tile); walk.next(unit, tile)) {
    const auto i_begin = static_cast<pos_t<IdType>>(unit * group);
    const auto i_end = static_cast<pos_t<IdType>>(min64(unit * group + group, items));
    for (int64_t slab = tile; slab < d.slabs; slab += walk.tiles) {
      const int64_t h = (slab << (d.lanes_log2 - d.head_log2)) + (t >> d.head_log2);
      const bool active = h < x.out_len;
      // An idle lane reads head 0 and discards it: the loads and shuffles stay unconditional.
      const int64_t a_first = x.a_elem(active ? h : 0), b_first = x.b_elem(active ? h : 0);
      auto write = [&](pos_t<IdType> p, pos_t<IdType> end, pos_t<IdType> v) {
        for (; p < end; p += N) {
          pos_t<IdType> rows[N], ia[N], ib[N];
#pragma unroll
          for (int u = 0; u < N; ++u) {
            const pos_t<IdType> q = min(p + u, end - 1);
            rows[u] = g.edge_pos(q);
            ia[u] = kByRow ? x.a_rows.row(q, v) : x.a_rows.row(q);
            ib[u] = kByRow ? x.b_rows.row(q, v) : x.b_rows.row(q);
          }
          Acc sum[N];
#pragma unroll
          for (int u = 0; u < N; ++u) sum[u] = Acc(0);
          for (int r = 0; r < d.reps; ++r) {
            const int64_t vec = j + (int64_t(r) << d.head_log2);
            const bool in = vec < d.vectors;
            const int64_t off = (in ? vec : 0) * kVec;
            const DType* const a_lane = x.a + a_first + off;
            const DType* const b_lane = x.b + b_first + off;
            Acc a[N][kVec], b[N][kVec];
#pragma unroll
            for (int u = 0; u < N; ++u) {
              load_vec<kVec>(row_ptr(a_lane, ia[u], x.a_row_bytes), a[u]);
              load_vec<kVec>(row_ptr(b_lane, ib[u], x.b_row_bytes), b[u]);
            }
            if (in) {
#pragma unroll
              for (int u = 0; u < N; ++u) {
#pragma unroll
                for (int k = 0; k < kVec; ++k) sum[u] += a[u][k] * b[u][k];
              }
            }
          }
#pragma unroll
          for (int u = 0; u < N; ++u) sum[u] = lane_group_sum(sum[u], 1 << d.head_log2, mask);
          if (active && j == 0) {
#pragma unroll
            for (int u = 0; u < N; ++u) {
              if (p + u < end) *row_ptr(x.c + h, rows[u], x.c_row_bytes) = from_acc<DType>(sum[u]);
            }
          }
        }
      };
      if constexpr (kByRow) {
        for (pos_t<IdType> v = i_begin; v < i_end; ++v) write(g.begin_pos(v), g.end_pos(v), v);
      } else {
        write(i_begin, i_end, 0);
      }
    }
  }
}

// Host side: whether every row of an operand (at data, rows `stride` elements apart, no broadcast
// offsets) starts on a boundary of `bytes` and holds whole vectors of vec elements.
inline bool whole_vectors(const void* data, int64_t stride, const int64_t* off, int vec, int bytes) {
  return off == nullptr && stride % vec == 0 && (reinterpret_cast<uintptr_t>(data) % bytes) == 0;
}

// Host side: whether lanes of kVec-element vectors fit the operands: every row of A and C starts
// on a vector boundary and holds whole vectors, and so does B's (gather_b 0), or B gives one
// value per kVec / gather_b elements, as b_off_block promises (0 and 1 promise nothing). Two
// values a lane serve u_mul_e and u_mul_v only (GAT's attention, the one op whose heads run that
// narrow), to bound the cubins.
template <typename DType, int kVec>
bool vectors_fit(const UgParams& p, int gather_b) {
  constexpr int kBytes = kVec * static_cast<int>(sizeof(DType));
  const bool lhs = p.edge_op != UG_COPY_RHS, rhs = p.edge_op != UG_COPY_LHS;
  if (p.out_len % kVec != 0 || reinterpret_cast<uintptr_t>(p.c) % kBytes != 0) return false;
  if (lhs && !whole_vectors(p.a, p.a_row_stride, p.a_off, kVec, kBytes)) return false;
  if (gather_b == 2 && p.edge_op != UG_MUL) return false;
  if (gather_b > 0) return lhs && rhs && p.b_off_block > 1 && p.b_off_block % (kVec / gather_b) == 0;
  return !rhs || whole_vectors(p.b, p.b_row_stride, p.b_off, kVec, kBytes);
}

// Host side: whether lanes of kW elements fit, trying B read as whole vectors, then B gathered
// once per vector, then, for lanes of 4 elements, twice; where one does, *err is what f returned
// for it. Two values a lane keep heads of 2 elements on 16-byte lanes of floats (8-byte ones with
// one value a lane) and on 8-byte lanes of halves (scalars). Against one value a lane on the
// suite's GAT cases at F = 16 (H200, session 29, bench/raw/ab_gather2_*): 8 float heads of 2
// 1.02x (1.05-1.20x from 1M edges up, 0.86-1.00x below 88K, where a call takes 5-11 us), 8 half
// heads of 2 1.27x (1.47-2.29x from 1M edges up); 4 half heads of 4 on 16-byte lanes, two values
// each, 0.96x against 8-byte lanes of one, which they keep.
template <typename DType, int kW, typename F>
bool try_width(const UgParams& p, F& f, cudaError_t* err) {
  using Width = std::integral_constant<int, kW>;
  if (vectors_fit<DType, kW>(p, 0)) {
    *err = f(Width(), std::integral_constant<int, 0>());
    return true;
  }
  if (vectors_fit<DType, kW>(p, 1)) {
    *err = f(Width(), std::integral_constant<int, 1>());
    return true;
  }
  if constexpr (kW == 4) {
    if (vectors_fit<DType, kW>(p, 2)) {
      *err = f(Width(), std::integral_constant<int, 2>());
      return true;
    }
  }
  return false;
}

// Host side: calls f(std::integral_constant<int, kVec>, std::integral_constant<int, kGatherB>)
// with the widest access the operands allow (try_width at each): 16-byte vectors, else 8-byte
// ones (a row of 2 floats), else scalars with B read whole.
template <typename DType, typename F>
cudaError_t with_vector_width(const UgParams& p, F&& f) {
  constexpr int kV = kVecOf<DType>;
  cudaError_t err = cudaSuccess;
  if (try_width<DType, kV>(p, f, &err)) return err;
  if constexpr (kV / 2 > 1) {
    if (try_width<DType, kV / 2>(p, f, &err)) return err;
  }
  return f(std::integral_constant<int, 1>(), std::integral_constant<int, 0>());
}

// Whether a (op, access) pair is ever dispatched: a gathered B needs an op that reads A and B,
// and two values a lane a product (vectors_fit).
template <typename Op>
struct IsMul : std::false_type {};
template <typename DType>
struct IsMul<binary::Mul<DType>> : std::true_type {};

template <typename Op, int kGatherB>
constexpr bool kDispatched = !Op::reduce_last_dim && (kGatherB == 0 || (Op::use_lhs && Op::use_rhs)) &&
                             (kGatherB < 2 || IsMul<Op>::value);

// The launchers behind warp_vertex and warp_edge for every op but dot: `group` rows (vertex) or
// positions (edge) per team, `tiling` teams per unit at most (never past the slabs).
template <typename DType, typename IdType>
cudaError_t launch_vertex(const UgParams& p, const OpArgs<DType, IdType>& x, cudaStream_t stream) {
  const int64_t units = ceil_div(p.num_dst, p.grouping);
  if (units == 0) return cudaSuccess;
  return with_vector_width<DType>(p, [&](auto vec, auto gather_b) {
    constexpr int kVec = decltype(vec)::value;
    constexpr int kGatherB = decltype(gather_b)::value;
    const bool tile_major = tile_major_fits<DType>(p);
    const Layout t = layout(p.out_len, kVec, tile_major ? p.tiling : 1);
    with_walk(units, p.tiling, t.slabs, t.lanes_log2, tile_major, [&](unsigned grid, auto walk) {
      using Walk = decltype(walk);
      if (p.gather_op == UG_GATHER_NONE) {
        UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
          if constexpr (kDispatched<Op, kGatherB>) {
            message<Op, true, kVec, kGatherB, DType, IdType, Walk>
                <<<grid, kBlock, 0, stream>>>(x, walk, p.grouping, t.lanes_log2, t.slabs);
          }
        });
      } else {
        UG_GATHER_SWITCH(p.gather_op, DType, Reduce, [&] {
          const HeavyRows heavy = heavy_rows<Reduce, kVec, DType, IdType>(p, t.lanes_log2, t.slabs);
          UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
            if constexpr (kDispatched<Op, kGatherB>) {
              if (heavy.blocks > 0) {
                vertex_heavy_rows<Op, Reduce, kVec, kGatherB, DType, IdType>
                    <<<heavy.blocks, kBlock, heavy.shared_bytes, stream>>>(x, t.lanes_log2, t.slabs, heavy);
              }
              vertex_aggregate<Op, Reduce, kVec, kGatherB, DType, IdType, Walk>
                  <<<grid, kBlock, 0, stream>>>(x, walk, p.grouping, t.lanes_log2, t.slabs, heavy.degree);
            }
          });
        });
      }
    });
    return cudaGetLastError();
  });
}

template <typename DType, typename IdType>
cudaError_t launch_edge(const UgParams& p, const OpArgs<DType, IdType>& x, cudaStream_t stream) {
  const int64_t units = ceil_div(p.num_edges, p.grouping);
  return with_vector_width<DType>(p, [&](auto vec, auto gather_b) -> cudaError_t {
    constexpr int kVec = decltype(vec)::value;
    constexpr int kGatherB = decltype(gather_b)::value;
    const bool tile_major = tile_major_fits<DType>(p);
    const Layout t = layout(p.out_len, kVec, tile_major ? p.tiling : 1);
    if (p.gather_op == UG_GATHER_NONE) {
      if (units == 0) return cudaSuccess;
      with_walk(units, p.tiling, t.slabs, t.lanes_log2, tile_major, [&](unsigned grid, auto walk) {
        UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
          if constexpr (kDispatched<Op, kGatherB>) {
            message<Op, false, kVec, kGatherB, DType, IdType, decltype(walk)>
                <<<grid, kBlock, 0, stream>>>(x, walk, p.grouping, t.lanes_log2, t.slabs);
          }
        });
      });
      return cudaGetLastError();
    }
    return UG_GATHER_SWITCH(p.gather_op, DType, Reduce, [&] {
      return run_edge_aggregation<Reduce>(p, x, stream, [&](const auto& sink) {
        with_walk(units, p.tiling, t.slabs, t.lanes_log2, tile_major, [&](unsigned grid, auto walk) {
          UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
            if constexpr (kDispatched<Op, kGatherB>) {
              edge_aggregate<Op, Reduce, kVec, kGatherB, DType, IdType, decltype(walk)>
                  <<<grid, kBlock, 0, stream>>>(x, walk, p.grouping, t.lanes_log2, t.slabs, sink);
            }
          });
        });
      });
    });
  });
}

// The launcher of dot messages for warp_vertex (kByRow) and warp_edge: 16-byte vectors where
// each head's K values are whole vectors of A and of B, else scalars.
template <bool kByRow, typename DType, typename IdType>
cudaError_t launch_dot_message(const UgParams& p, const OpArgs<DType, IdType>& x, cudaStream_t stream) {
  const int64_t units = ceil_div(kByRow ? p.num_dst : p.num_edges, p.grouping);
  if (units == 0) return cudaSuccess;
  constexpr int kV = kVecOf<DType>;
  auto launch = [&](auto vec) {
    constexpr int kVec = decltype(vec)::value;
    const DotLayout d = dot_layout(p.out_len, p.reduce_size, kVec);
    with_walk(units, p.tiling, d.slabs, d.lanes_log2, tile_major_fits<DType>(p), [&](unsigned grid, auto walk) {
      dot_message<kByRow, kVec, DType, IdType, decltype(walk)><<<grid, kBlock, 0, stream>>>(x, walk, p.grouping, d);
    });
    return cudaGetLastError();
  };
  constexpr int kBytes = kV * static_cast<int>(sizeof(DType));
  if (p.reduce_size % kV == 0 && whole_vectors(p.a, p.a_row_stride, p.a_off, kV, kBytes) &&
      whole_vectors(p.b, p.b_row_stride, p.b_off, kV, kBytes)) {
    return launch(std::integral_constant<int, kV>());
  }
  return launch(std::integral_constant<int, 1>());
}

}  // namespace team
}  // namespace ugraph
