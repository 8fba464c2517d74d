// The fused edge softmax (softmax.h). A team of 2^k lanes takes one destination row at a time,
// as many lanes as a row of the average in-degree needs to hold kHold positions each (at most a
// warp); rows are taken warp-uniformly, so every lane of a warp reaches every shuffle, and the
// team combines its lanes' maxima and sums by an xor butterfly. Each position's edge row is taken
// kC elements at a time (1 for one head, 4 for up to four, else 8), in 16-byte vectors where the
// row's length and the tensors' alignment allow (8 heads of float32 are two loads). A row that
// fits the team (kHold positions a lane) is loaded once, every edge id and score in flight
// together, and its three passes (max, sum, write) run on registers; a longer row is read again
// in each pass (a batch of positions a lane in flight at a time), from cache after the first.
// A row much longer than the average would hold up its team's warp while the rest of the GPU
// idles: the long rows get a warp each, and the longest a block each (Tiers).
// Either direction may run split (UgSoftmaxSplit): the same kernels keep each row's statistics
// in a workspace (the maxima and sums of the forward, the sums of y of the backward) instead of
// writing the row, then edge_softmax_finish writes every edge id's result in edge-id order.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "common.cuh"
#include "entry.h"
#include "functor.cuh"
#include "softmax.h"
#include "static_switch.h"
#include "team.cuh"

namespace ugraph {
namespace {

constexpr int kHold = 4;   // positions a lane holds in registers

// What a row kernel computes. kForward: out = exp(x - max) / sum over the row of exp(x - max).
// kBackward: x is the forward's output, y = x * (output gradient): out = y - x * sum(y).
// kForwardRows, kBackwardRows: the split's first launch, each row's max and sum (the forward) or
// sum of y (the backward, which reads no x) into the workspace, no out.
enum class Pass { kForward, kBackward, kForwardRows, kBackwardRows };
__host__ __device__ constexpr bool backward(Pass pass) { return pass == Pass::kBackward || pass == Pass::kBackwardRows; }
__host__ __device__ constexpr bool rows_only(Pass pass) {
  return pass == Pass::kForwardRows || pass == Pass::kBackwardRows;
}
__host__ __device__ constexpr bool reads_x(Pass pass) { return pass != Pass::kBackwardRows; }
__host__ __device__ constexpr bool reads_y(Pass pass) { return backward(pass); }

__device__ __forceinline__ float exp_acc(float x) { return expf(x); }
__device__ __forceinline__ double exp_acc(double x) { return exp(x); }

template <typename T>
__device__ __forceinline__ T team_max(T v, int lanes) {
  for (int m = lanes >> 1; m > 0; m >>= 1) {
    const T other = __shfl_xor_sync(kFullMask, v, m);
    if (v < other) v = other;  // as reduce::Max: NaN never wins (no lane holds one)
  }
  return v;
}

// Elements [0, n) of a chunk at p into a (the rest 0): 16-byte vectors where `vec` (the row length
// a multiple of a vector, the tensor 16-byte aligned, so every chunk is whole vectors), else one
// by one.
template <typename DType, int kC>
__device__ __forceinline__ void load_chunk(const DType* p, int n, bool vec, acc_t<DType> (&a)[kC]) {
  constexpr int kVec = 16 / sizeof(DType);
  if constexpr (kC % kVec == 0) {
    if (vec) {
#pragma unroll
      for (int v = 0; v < kC; v += kVec) {
        alignas(16) DType e[kVec];
        *reinterpret_cast<uint4*>(e) = v < n ? __ldg(reinterpret_cast<const uint4*>(p + v)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int k = 0; k < kVec; ++k) a[v + k] = to_acc(e[k]);
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < kC; ++k) a[k] = k < n ? load(p + k) : acc_t<DType>(0);
}

template <typename DType, int kC>
__device__ __forceinline__ void store_chunk(DType* p, int n, bool vec, const acc_t<DType> (&a)[kC]) {
  constexpr int kVec = 16 / sizeof(DType);
  if constexpr (kC % kVec == 0) {
    if (vec) {
#pragma unroll
      for (int v = 0; v < kC; v += kVec) {
        if (v >= n) break;
        alignas(16) DType e[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) e[k] = from_acc<DType>(a[v + k]);
        *reinterpret_cast<uint4*>(p + v) = *reinterpret_cast<const uint4*>(e);
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < kC; ++k) {
    if (k < n) p[k] = from_acc<DType>(a[k]);
  }
}

// The three passes' steps on one position's chunk (xs; ys the backward's y), shared by both
// kernels (Pass says what they compute).
template <typename Acc, int kC>
__device__ __forceinline__ void fold_max(Acc (&top)[kC], const Acc (&xs)[kC]) {
#pragma unroll
  for (int k = 0; k < kC; ++k) {
    if (top[k] < xs[k]) top[k] = xs[k];
  }
}

template <Pass kPass, typename Acc, int kC>
__device__ __forceinline__ void fold_sum(Acc (&sum)[kC], const Acc (&top)[kC], const Acc (&xs)[kC],
                                         const Acc (&ys)[kC]) {
#pragma unroll
  for (int k = 0; k < kC; ++k) sum[k] += backward(kPass) ? ys[k] : exp_acc(xs[k] - top[k]);
}

// An edge's result from its row's statistics (the one launch and a split's second alike): the
// forward's exp(x - max) / sum, the backward's y - x * sum.
template <bool kBackward, typename Acc>
__device__ __forceinline__ Acc result(Acc x, Acc y, Acc top, Acc sum) {
  return kBackward ? y - x * sum : exp_acc(x - top) / sum;
}

template <bool kBackward, typename DType, typename Acc, int kC>
__device__ __forceinline__ void write_chunk(DType* p, int n, bool vec, const Acc (&top)[kC],
                                            const Acc (&sum)[kC], const Acc (&xs)[kC],
                                            const Acc (&ys)[kC]) {
  Acc o[kC];
#pragma unroll
  for (int k = 0; k < kC; ++k) o[k] = result<kBackward>(xs[k], ys[k], top[k], sum[k]);
  store_chunk(p, n, vec, o);
}

// A row's chunk of n statistics into a split's workspace, from one thread: stats holds num_dst x
// len sums, then (the forward) as many maxima from stats + maxima.
template <Pass kPass, typename Acc, int kC>
__device__ __forceinline__ void store_stats(Acc* stats, int64_t maxima, int64_t at, int n, const Acc (&top)[kC],
                                            const Acc (&sum)[kC]) {
#pragma unroll
  for (int k = 0; k < kC; ++k) {
    if (k >= n) continue;
    stats[at + k] = sum[k];
    if constexpr (!backward(kPass)) stats[maxima + at + k] = top[k];
  }
}

template <typename Acc, int kC>
__device__ __forceinline__ void start(Acc (&top)[kC], Acc (&sum)[kC], Acc zero) {
#pragma unroll
  for (int k = 0; k < kC; ++k) {
    top[k] = zero;
    sum[k] = Acc(0);
  }
}

// f(edge row, xs, ys) for the positions first, first + stride, ... below end, kBatch at a time
// (16 elements or 4 positions): a batch's edge ids, then its chunks, are all in flight before
// the first is used.
template <Pass kPass, int kC, typename DType, typename IdType, typename F>
__device__ __forceinline__ void walk(const IdType* eid, const DType* x, const DType* y, int64_t len, int64_t j0, int n,
                                     bool vec, int64_t first, int64_t end, int64_t stride, F&& f) {
  using Acc = acc_t<DType>;
  constexpr int kBatch = kC > 4 ? 2 : 4;
  for (int64_t q0 = first; q0 < end; q0 += int64_t(kBatch) * stride) {
    int64_t r[kBatch];
    Acc xs[kBatch][kC], ys[kBatch][kC];
#pragma unroll
    for (int h = 0; h < kBatch; ++h) {
      const int64_t q = q0 + h * stride;
      r[h] = q < end ? (eid ? load_index(eid + q) : q) * len : -1;
    }
#pragma unroll
    for (int h = 0; h < kBatch; ++h) {
      if (r[h] < 0) continue;
      if constexpr (reads_x(kPass)) load_chunk(x + r[h] + j0, n, vec, xs[h]);
      if constexpr (reads_y(kPass)) load_chunk(y + r[h] + j0, n, vec, ys[h]);
    }
#pragma unroll
    for (int h = 0; h < kBatch; ++h) {
      if (r[h] >= 0) f(r[h], xs[h], ys[h]);
    }
  }
}

// The rows of in-degree in (lo, hi]: every row (list NULL), or those of a list longest first
// (the graph's long rows) with a warp each (lanes_log2 5), which stops at its first row of lo or
// fewer in-edges. stats: the workspace of a split's first launch (store_stats).
template <typename DType, typename IdType, Pass kPass, int kC>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    edge_softmax_rows(const UgSoftmaxParams p, const int lanes_log2, const IdType* list, const int64_t count,
                      const int64_t lo, const int64_t hi, const bool vec, acc_t<DType>* stats) {
  using Acc = acc_t<DType>;
  const auto* indptr = static_cast<const IdType*>(p.indptr);
  const auto* eid = static_cast<const IdType*>(p.eid);
  const auto* x = static_cast<const DType*>(p.x);
  const auto* y = static_cast<const DType*>(p.y);
  auto* out = static_cast<DType*>(p.out);
  const int lanes = 1 << lanes_log2;
  const int t = lane_id() & (lanes - 1);
  const int64_t teams = kWarp >> lanes_log2;  // per warp
  const int64_t len = p.len;
  const int64_t slots = list ? count : p.num_dst;
  for (int64_t base = global_warp() * teams; base < slots; base += warp_count() * teams) {
    const int64_t slot = base + (lane_id() >> lanes_log2);
    const int64_t v = slot >= slots ? -1 : list ? load_index(list + slot) : slot;
    const int64_t begin = v >= 0 ? load_index(indptr + v) : 0;
    int64_t end = v >= 0 ? load_index(indptr + v + 1) : 0;
    if (list && end - begin <= lo) break;  // a team is the warp here
    const bool owned = v >= 0 && end - begin <= hi;  // a row past hi is a later tier's
    if (!owned) end = begin;
    const bool held = end - begin <= int64_t(kHold) * lanes;  // the team's own branch
    // The held positions' edge rows (-1: past the row's end).
    int64_t row[kHold];
#pragma unroll
    for (int h = 0; h < kHold; ++h) {
      const int64_t q = begin + t + int64_t(h) * lanes;
      row[h] = held && q < end ? (eid ? load_index(eid + q) : q) * len : -1;
    }
    for (int64_t j0 = 0; j0 < len; j0 += kC) {
      const int n = static_cast<int>(min64(kC, len - j0));
      Acc hx[kHold][kC], hy[kHold][kC];
      if (held) {
#pragma unroll
        for (int h = 0; h < kHold; ++h) {
          if (row[h] < 0) continue;
          if constexpr (reads_x(kPass)) load_chunk(x + row[h] + j0, n, vec, hx[h]);
          if constexpr (reads_y(kPass)) load_chunk(y + row[h] + j0, n, vec, hy[h]);
        }
      }
      // f(edge row, xs, ys) for every position of this lane: from the registers of a held row,
      // else loaded again (a longer row's walk).
      auto each = [&](auto&& f) {
        if (held) {
#pragma unroll
          for (int h = 0; h < kHold; ++h) {
            if (row[h] >= 0) f(row[h], hx[h], reads_y(kPass) ? hy[h] : hx[h]);
          }
          return;
        }
        walk<kPass, kC>(eid, x, y, len, j0, n, vec, begin + t, end, lanes, f);
      };
      Acc top[kC], sum[kC];
      start(top, sum, reduce::Max<DType>::zero());
      if constexpr (!backward(kPass)) {
        each([&](int64_t, const Acc(&xs)[kC], const Acc(&)[kC]) { fold_max(top, xs); });
#pragma unroll
        for (int k = 0; k < kC; ++k) top[k] = team_max(top[k], lanes);
      }
      each([&](int64_t, const Acc(&xs)[kC], const Acc(&ys)[kC]) { fold_sum<kPass>(sum, top, xs, ys); });
#pragma unroll
      for (int k = 0; k < kC; ++k) sum[k] = lane_group_sum(sum[k], lanes);
      if constexpr (rows_only(kPass)) {
        if (owned && t == 0) store_stats<kPass>(stats, p.num_dst * len, v * len + j0, n, top, sum);
      } else {
        each([&](int64_t r, const Acc(&xs)[kC], const Acc(&ys)[kC]) {
          write_chunk<backward(kPass)>(out + r + j0, n, vec, top, sum, xs, ys);
        });
      }
    }
  }
}

// A block's maxima or sums of v over its warps, in every thread, in one fixed order.
template <bool kMax, typename Acc, int kC>
__device__ __forceinline__ void block_combine(Acc (&v)[kC], Acc (*part)[kC]) {
#pragma unroll
  for (int k = 0; k < kC; ++k) v[k] = kMax ? team_max(v[k], kWarp) : lane_group_sum(v[k], kWarp);
  __syncthreads();  // the previous combine's readers are done with part
  if (lane_id() == 0) {
#pragma unroll
    for (int k = 0; k < kC; ++k) part[threadIdx.x / kWarp][k] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kC; ++k) {
    Acc c = part[0][k];
    for (int w = 1; w < kWarpsPerBlock; ++w) {
      if (kMax) {
        if (c < part[w][k]) c = part[w][k];
      } else {
        c += part[w][k];
      }
    }
    v[k] = c;
  }
}

// The rows longer than `heavy`, a block each: the graph's long rows (longest first, so a block
// stops at its first row of `heavy` or fewer in-edges), every pass read again from cache.
template <typename DType, typename IdType, Pass kPass, int kC>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    edge_softmax_heavy(const UgSoftmaxParams p, const IdType* rows, const int64_t count, const int64_t heavy,
                       const bool vec, acc_t<DType>* stats) {
  using Acc = acc_t<DType>;
  __shared__ Acc part[kWarpsPerBlock][kC];
  const auto* indptr = static_cast<const IdType*>(p.indptr);
  const auto* eid = static_cast<const IdType*>(p.eid);
  const auto* x = static_cast<const DType*>(p.x);
  const auto* y = static_cast<const DType*>(p.y);
  auto* out = static_cast<DType*>(p.out);
  const int64_t len = p.len;
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const int64_t v = load_index(rows + i);
    const int64_t begin = load_index(indptr + v), end = load_index(indptr + v + 1);
    if (end - begin <= heavy) return;
    for (int64_t j0 = 0; j0 < len; j0 += kC) {
      const int n = static_cast<int>(min64(kC, len - j0));
      auto each = [&](auto&& f) { walk<kPass, kC>(eid, x, y, len, j0, n, vec, begin + threadIdx.x, end, kBlock, f); };
      Acc top[kC], sum[kC];
      start(top, sum, reduce::Max<DType>::zero());
      if constexpr (!backward(kPass)) {
        each([&](int64_t, const Acc(&xs)[kC], const Acc(&)[kC]) { fold_max(top, xs); });
        block_combine<true>(top, part);
      }
      each([&](int64_t, const Acc(&xs)[kC], const Acc(&ys)[kC]) { fold_sum<kPass>(sum, top, xs, ys); });
      block_combine<false>(sum, part);
      if constexpr (rows_only(kPass)) {
        if (threadIdx.x == 0) store_stats<kPass>(stats, p.num_dst * len, v * len + j0, n, top, sum);
      } else {
        each([&](int64_t r, const Acc(&xs)[kC], const Acc(&ys)[kC]) {
          write_chunk<backward(kPass)>(out + r + j0, n, vec, top, sum, xs, ys);
        });
      }
    }
  }
}

// A split's second launch: every edge id's result from its row's statistics (result()), in
// edge-id order (edge_dst: each edge id's destination), a thread a 16-byte vector of an edge row
// where `vec` (the row's length a multiple of a vector), else a thread an element.
template <typename DType, typename IdType, bool kBackward>
__global__ void __launch_bounds__(kBlock)
    edge_softmax_finish(const UgSoftmaxParams p, const IdType* edge_dst, const acc_t<DType>* stats, const bool vec) {
  using Acc = acc_t<DType>;
  constexpr int kVec = 16 / sizeof(DType);
  const auto* x = static_cast<const DType*>(p.x);
  const auto* y = static_cast<const DType*>(p.y);
  auto* out = static_cast<DType*>(p.out);
  const int64_t len = p.len;
  const int64_t width = vec ? kVec : 1;        // elements a thread a step
  const int64_t pieces = len / width;          // a row's pieces of `width`
  const int64_t total = p.num_edges * pieces;
  for (int64_t u = global_thread(); u < total; u += thread_count()) {
    const int64_t e = pieces == 1 ? u : u / pieces;
    const int64_t at = e * len + (u - e * pieces) * width;  // the piece's first element
    const Acc* sum = stats + load_index(edge_dst + e) * len + (at - e * len);
    const Acc* top = sum + p.num_dst * len;  // the forward's maxima
    if (vec) {
      alignas(16) DType xv[kVec], yv[kVec], ov[kVec];
      *reinterpret_cast<uint4*>(xv) = __ldg(reinterpret_cast<const uint4*>(x + at));
      if constexpr (kBackward) *reinterpret_cast<uint4*>(yv) = __ldg(reinterpret_cast<const uint4*>(y + at));
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        ov[k] = from_acc<DType>(result<kBackward>(to_acc(xv[k]), kBackward ? to_acc(yv[k]) : Acc(0),
                                                  kBackward ? Acc(0) : __ldg(top + k), __ldg(sum + k)));
      }
      *reinterpret_cast<uint4*>(out + at) = *reinterpret_cast<const uint4*>(ov);
    } else {
      out[at] = from_acc<DType>(result<kBackward>(load(x + at), kBackward ? load(y + at) : Acc(0),
                                                  kBackward ? Acc(0) : __ldg(top), __ldg(sum)));
    }
  }
}

std::string check(const UgSoftmaxParams* p, const UgSoftmaxRows* rows, const UgSoftmaxSplit* split, bool backward_call) {
  if (!p) return "params is NULL";
  if (p->index_bits != 32 && p->index_bits != 64) return "index_bits must be 32 or 64, got " + std::to_string(p->index_bits);
  if (p->num_dst < 0 || p->num_edges < 0 || p->len < 0) return "negative size";
  if (p->index_bits == 32 && p->num_edges > INT32_MAX) return "num_edges does not fit 32-bit indices";
  if (p->dtype < UG_F32 || p->dtype > UG_BF16) return "unknown dtype " + std::to_string(p->dtype);
  if (!p->indptr) return "indptr is NULL";
  if (p->num_edges > 0 && p->len > 0 && (!p->x || !p->out || (backward_call && !p->y)))
    return std::string("x, out") + (backward_call ? " and y" : "") + " must be set when there are elements";
  if (rows && (rows->max_degree < 0 || rows->num_long_rows < 0 || (rows->num_long_rows > 0 && !rows->long_rows)))
    return "rows: a negative max_degree or count, or long_rows NULL with a count";
  if (split && (!split->edge_dst || !split->stats)) return "split: edge_dst and stats must both be set";
  return "";
}

// Three tiers, so that no row holds up its worker while the rest of the GPU idles: each row of up
// to `team` in-edges (kHold positions a lane, and at least UG_LONG_ROW, past which rows are long)
// with a team sized to the average row; the longer ones a warp each, and those past `warp` a block
// each. A row is too long for a warp past kHeavyFactor times E over the resident warps (as the
// aggregation's heavy rows, team.cuh), and the blocks run only where the longest row passes
// kHeavyLaunch times that.
struct Tiers {
  int64_t team = INT64_MAX;  // the teams' rows: up to this many in-edges
  int64_t warp = INT64_MAX;  // the warps' rows: up to this many
  int64_t warps = 0;         // warps of the second launch (0: none)
  unsigned blocks = 0;       // blocks of the third (0: none)
};

Tiers tiers(const UgSoftmaxParams& p, const UgSoftmaxRows* rows, int lanes_log2) {
  Tiers t;
  const int64_t team_rows = std::max(int64_t(UG_LONG_ROW), int64_t(kHold) << lanes_log2);
  if (!rows || rows->num_long_rows == 0 || rows->max_degree <= team_rows) return t;
  const int64_t sms = std::max<int64_t>(team::device_attribute<cudaDevAttrMultiProcessorCount>(), 1);
  t.team = team_rows;
  t.warps = rows->num_long_rows;
  const int64_t warp_rows =
      std::max(team_rows, team::kHeavyFactor * ceil_div(p.num_edges, sms * team::kResidentWarpsPerSm));
  if (rows->max_degree > team::kHeavyLaunch * warp_rows) {
    t.warp = warp_rows;
    t.blocks = static_cast<unsigned>(std::min(rows->num_long_rows, sms * team::kHeavyBlocksPerSm));
  }
  return t;
}

int run(const UgSoftmaxParams* p, const UgSoftmaxRows* rows, const UgSoftmaxSplit* split, void* stream,
        bool backward_call) {
  const std::string why = check(p, rows, split, backward_call);
  if (!why.empty()) {
    set_last_error(why);
    return UG_ERR_INVALID;
  }
  if (p->num_dst == 0 || p->num_edges == 0 || p->len == 0) return UG_OK;
  int lanes_log2 = 0;  // lanes per row: enough to hold a row of the average in-degree, at most a warp
  while ((int64_t(kHold) << lanes_log2) * p->num_dst < p->num_edges && lanes_log2 < 5) ++lanes_log2;
  const int64_t warps = ceil_div(p->num_dst, int64_t(kWarp) >> lanes_log2);
  const Tiers tier = tiers(*p, rows, lanes_log2);
  // 16-byte accesses where every chunk of every row is whole vectors at aligned addresses.
  const int64_t elem = p->dtype == UG_F64 ? 8 : p->dtype == UG_F32 ? 4 : 2;
  const int64_t vec_elems = 16 / elem;
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const bool vec = p->len % vec_elems == 0 && aligned(p->x) && aligned(p->out) && (!backward_call || aligned(p->y));
  const auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t err = UG_DTYPE_SWITCH(p->dtype, DType, [&] {
    return UG_INDEX_SWITCH(p->index_bits, IdType, [&] {
      using Acc = acc_t<DType>;
      auto* stats = split ? static_cast<Acc*>(split->stats) : nullptr;
      auto launch = [&](auto pass_c, auto chunk_c) {
        constexpr Pass kPass = decltype(pass_c)::value;
        constexpr int kC = decltype(chunk_c)::value;
        const auto* list = tier.warps > 0 ? static_cast<const IdType*>(rows->long_rows) : nullptr;
        edge_softmax_rows<DType, IdType, kPass, kC><<<grid_for(warps * kWarp), kBlock, 0, s>>>(
            *p, lanes_log2, nullptr, 0, -1, tier.team, vec, stats);
        if (tier.warps > 0) {
          edge_softmax_rows<DType, IdType, kPass, kC><<<grid_for(tier.warps * kWarp), kBlock, 0, s>>>(
              *p, 5, list, rows->num_long_rows, tier.team, tier.warp, vec, stats);
        }
        if (tier.blocks > 0) {
          edge_softmax_heavy<DType, IdType, kPass, kC><<<tier.blocks, kBlock, 0, s>>>(
              *p, list, rows->num_long_rows, tier.warp, vec, stats);
        }
        if constexpr (rows_only(kPass)) {
          const int64_t width = vec ? 16 / int64_t(sizeof(DType)) : 1;
          edge_softmax_finish<DType, IdType, backward(kPass)><<<grid_for(p->num_edges * (p->len / width)), kBlock, 0, s>>>(
              *p, static_cast<const IdType*>(split->edge_dst), stats, vec);
        }
        return cudaGetLastError();
      };
      // The chunk: a whole row of one score (one head) or up to four, else 8 elements a pass (4
      // for float64, whose 8 would spill).
      auto chunked = [&](auto pass_c) {
        using C1 = std::integral_constant<int, 1>;
        using C4 = std::integral_constant<int, 4>;
        if (p->len == 1) return launch(pass_c, C1{});
        if constexpr (sizeof(DType) < 8) {
          if (p->len > 4) return launch(pass_c, std::integral_constant<int, 8>{});
        }
        return launch(pass_c, C4{});
      };
      using P = Pass;
      if (!backward_call) {
        return split ? chunked(std::integral_constant<P, P::kForwardRows>{}) : chunked(std::integral_constant<P, P::kForward>{});
      }
      return split ? chunked(std::integral_constant<P, P::kBackwardRows>{}) : chunked(std::integral_constant<P, P::kBackward>{});
    });
  });
  if (err != cudaSuccess) {
    set_last_error(std::string("CUDA error in the edge softmax: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
    return UG_ERR_CUDA;
  }
  return UG_OK;
}

}  // namespace
}  // namespace ugraph

extern "C" int ug_cuda_edge_softmax_forward(const UgSoftmaxParams* p, const UgSoftmaxRows* rows,
                                            const UgSoftmaxSplit* split, void* stream) {
  return ugraph::run(p, rows, split, stream, false);
}
extern "C" int ug_cuda_edge_softmax_backward(const UgSoftmaxParams* p, const UgSoftmaxRows* rows,
                                             const UgSoftmaxSplit* split, void* stream) {
  return ugraph::run(p, rows, split, stream, true);
}
