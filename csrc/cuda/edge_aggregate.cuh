// Aggregation in the edge strategies (thread_edge, warp_edge), where several workers may share
// an output row. Units are row-aligned (unit_start): unit u nominally holds positions
// [u * group, (u + 1) * group), but a row no longer than `group` belongs whole to the unit where it
// starts, and only a longer row is cut at the multiples of `group`. So a row is split over units
// exactly when its degree exceeds `group` (row_split), and only those rows ever combine partial
// results; every unit still holds fewer than 2 * group positions, however skewed the rows are.
// A worker folds each run of consecutive positions of one row into a private accumulator. A run
// that holds its whole row has no one to race with: it stores C, and for max/min the args,
// directly. Every run of a split row is flushed once into a target that all workers share:
//   sum, f32/f64 : C itself, its split rows cleared first, atomicAdd;
//   sum, f16/bf16: a float workspace, its split rows cleared first, atomicAdd, then rounded into C;
//   max/min      : a workspace of packed keys (common.cuh), its split rows cleared first,
//                  atomicMax, then decoded into C, arg_a and arg_b.
// Two passes over the rows (edge_rows_pass) do the clearing, write the empty rows (no worker
// visits them) and finish the workspace; they write only split and empty rows, and read two
// indptr entries per row otherwise. Where the caller's workspace holds zeros on entry
// (params.h's workspace_zeroed), max/min and the half sums skip the clearing pass: the finishing
// pass writes the empty rows too and clears the workspace entries it read, so the workspace
// leaves as it came.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "common.cuh"
#include "functor.cuh"

namespace ugraph {

template <typename Reduce, typename DType>
struct EdgeSink {
  using Acc = acc_t<DType>;
  static constexpr bool kPacked = Reduce::require_arg;
  static constexpr bool kStaged = !kPacked && is_half_v<DType>;
  // A double does not fit the 32-bit value half of a packed key; ug_cuda_check refuses it.
  static constexpr bool kSupported = !(kPacked && std::is_same_v<DType, double>);
  // What the target holds per output element.
  using Element = std::conditional_t<kPacked, unsigned long long, std::conditional_t<kStaged, float, DType>>;

  void* target;  // C, the float workspace or the keys, as above

  // Folds the aggregate of one run into output element e of row v. win is the winning position
  // (max/min; -1 when no message beat the reduce zero, and acc is then that zero); whole says the
  // run is its row's only run.
  template <typename IdType>
  __device__ __forceinline__ void flush(const OpArgs<DType, IdType>& x, int64_t v, int64_t e, Acc acc, int64_t win,
                                        bool whole) const {
    const int64_t i = v * x.out_len + e;
    if constexpr (!kPacked) {
      if (x.mean) acc = x.mean_of(acc, x.graph.end(v) - x.graph.begin(v));
    }
    if (whole) {
      if constexpr (kPacked) {
        x.store(i, acc, win >= 0 && x.arg_a ? x.a_rows.at(win) : 0, win >= 0 && x.arg_b ? x.b_rows.at(win) : 0);
      } else {
        x.c[i] = from_acc<DType>(acc);
      }
    } else if constexpr (kPacked) {
      if (win >= 0) atomicMax(static_cast<unsigned long long*>(target) + i, pack_key<Reduce::is_min>(acc, win));
    } else {
      atomicAdd(static_cast<Acc*>(target) + i, acc);
    }
  }

  // The max/min keys of a partial run over kVec consecutive elements from i on. Keys only grow,
  // so an element whose slot already holds a greater key (read from L2: stale at worst, never
  // ahead of the truth) needs no atomic; all kVec slots are read before any atomic, which may
  // alias them. On a hub row split over many units most flushes lose, and the atomics they
  // skip would queue on the few L2 slices that hold the row.
  template <int kVec, typename Win>
  __device__ __forceinline__ void flush_partial_keys(int64_t i, const Acc (&acc)[kVec], const Win (&win)[kVec]) const {
    static_assert(kPacked, "sums flush through flush_partial_sum");
    auto* slots = static_cast<unsigned long long*>(target) + i;
    unsigned long long held[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) held[k] = __ldcg(slots + k);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      if (win[k] < 0) continue;  // nothing beat the reduce zero
      const unsigned long long key = pack_key<Reduce::is_min>(acc[k], win[k]);
      if (key > held[k]) atomicMax(slots + k, key);
    }
  }

  // The sums of a partial run over kVec consecutive elements from i on (i a multiple of kVec,
  // the target's rows aligned: see team::with_vector_width), as 16- or 8-byte vector atomics
  // where the GPU has them (float4 and float2, sm_90 on): a quarter or half of the atomic
  // operations of one per element.
  template <int kVec>
  __device__ __forceinline__ void flush_partial_sum(int64_t i, const Acc (&acc)[kVec]) const {
    static_assert(!kPacked, "max/min flush through packed keys");
    // The vector overloads exist only where the GPU has them: the guard keeps the calls out of
    // the other architectures' compilation altogether (a discarded branch is still parsed).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int kStep = !std::is_same_v<Acc, float> ? 1 : kVec % 4 == 0 ? 4 : kVec % 2 == 0 ? 2 : 1;
#else
    constexpr int kStep = 1;
#endif
    auto* out = static_cast<Acc*>(target) + i;
    if constexpr (kStep == 1) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) atomicAdd(out + k, acc[k]);
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#pragma unroll
      for (int k = 0; k < kVec; k += kStep) {
        if constexpr (kStep == 4) {
          atomicAdd(reinterpret_cast<float4*>(out + k), make_float4(acc[k], acc[k + 1], acc[k + 2], acc[k + 3]));
        } else {
          atomicAdd(reinterpret_cast<float2*>(out + k), make_float2(acc[k], acc[k + 1]));
        }
      }
#endif
    }
  }
};

// The first position of unit u: u * group, moved past the row it falls in where that row starts
// before it and is no longer than `group` (the row then belongs whole to an earlier unit).
// Unit u holds [unit_start(u), unit_start(u + 1)), possibly nothing at the end of the graph.
template <typename IdType>
__device__ __forceinline__ int64_t unit_start(const Topology<IdType>& g, int64_t u, int64_t group) {
  const int64_t p = u * group;
  if (p >= g.num_edges) return g.num_edges;
  const int64_t v = g.dst(p);
  const int64_t b = g.begin(v), e = g.end(v);  // both loads in flight at once
  return b < p && e - b <= group ? e : p;
}

// Whether a row of `degree` positions is split over units (its value goes through the target).
__host__ __device__ __forceinline__ bool row_split(int64_t degree, int64_t group) { return degree > group; }

// What one row pass writes in row `first / out_len` (element `first` on), a team of `lanes` lanes
// over its elements, kRowBatch of them in flight per lane: kFinish false, the target's split row
// cleared, or an empty row of C (the reduce zero, args 0); kFinish true, the split row's keys
// decoded (value and args) or its float workspace rounded into C, and with kClear the entries
// read then cleared, or an empty row of C. Each batch loads all its keys (and then all its args)
// before it stores, as a store may alias any later load.
constexpr int kRowBatch = 4;

template <typename Reduce, typename DType, typename IdType>
__device__ __forceinline__ void store_empty_batch(const OpArgs<DType, IdType>& x, int64_t first, int64_t j0, int lanes) {
#pragma unroll
  for (int b = 0; b < kRowBatch; ++b) {
    const int64_t j = j0 + b * lanes;
    if (j >= x.out_len) break;
    x.store(first + j, Reduce::zero(), 0, 0);
  }
}

template <bool kFinish, bool kClear, typename Reduce, typename DType, typename IdType>
__device__ __forceinline__ void edge_row_write(const EdgeSink<Reduce, DType>& sink, const OpArgs<DType, IdType>& x,
                                               int64_t first, bool split, int t, int lanes) {
  using Sink = EdgeSink<Reduce, DType>;
  static_assert(kFinish || !kClear, "only the finishing pass clears the workspace");
  for (int64_t j0 = t; j0 < x.out_len; j0 += int64_t(lanes) * kRowBatch) {
    if (kClear && !split) {  // an empty row (the clearing finish writes those, no pass ran before)
      store_empty_batch<Reduce>(x, first, j0, lanes);
      continue;
    }
    if constexpr (kFinish && Sink::kPacked) {
      auto* keys = static_cast<unsigned long long*>(sink.target) + first;
      unsigned long long key[kRowBatch];
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
        const int64_t j = j0 + b * lanes;
        key[b] = j < x.out_len ? keys[j] : 0;  // 0: nothing beat the reduce zero
      }
      if constexpr (kClear) {
#pragma unroll
        for (int b = 0; b < kRowBatch; ++b) {
          const int64_t j = j0 + b * lanes;
          if (j < x.out_len) keys[j] = 0;
        }
      }
      int64_t win_a[kRowBatch], win_b[kRowBatch];
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
        const int64_t pos = key_position(key[b]);
        win_a[b] = key[b] != 0 && x.arg_a && x.a_rows.used ? x.a_rows.at(pos) : 0;
        win_b[b] = key[b] != 0 && x.arg_b && x.b_rows.used ? x.b_rows.at(pos) : 0;
      }
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
        const int64_t j = j0 + b * lanes;
        if (j < x.out_len) {
          x.store(first + j, key[b] == 0 ? Reduce::zero() : key_value<Reduce::is_min>(static_cast<uint32_t>(key[b] >> 32)),
                  win_a[b], win_b[b]);
        }
      }
    } else if constexpr (kFinish) {
      static_assert(Sink::kStaged, "only packed keys and the float workspace are finished");
      float* staged = static_cast<float*>(sink.target) + first;
      float value[kRowBatch];
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
        const int64_t j = j0 + b * lanes;
        value[b] = j < x.out_len ? staged[j] : 0.f;
      }
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
        const int64_t j = j0 + b * lanes;
        if (j < x.out_len) {
          x.c[first + j] = from_acc<DType>(value[b]);
          if constexpr (kClear) staged[j] = 0.f;
        }
      }
    } else {
#pragma unroll
      for (int b = 0; b < kRowBatch; ++b) {
        const int64_t j = j0 + b * lanes;
        if (j >= x.out_len) break;
        if (split) {
          static_cast<typename Sink::Element*>(sink.target)[first + j] = typename Sink::Element(0);
        } else {
          x.store(first + j, Reduce::zero(), 0, 0);
        }
      }
    }
  }
}

// One pass over the destination rows that writes some of them (edge_row_write): kFinish false,
// before the aggregation, the split and the empty rows; kFinish true, after it, the split rows,
// and with kClear (the workspace came zeroed, and no pass ran before) the empty rows too.
// A window of 32 rows is read by 2^window_log2 warps, a degree per lane, and its k-th row to
// write goes to worker k mod workers, a worker being a team of 2^lanes_log2 lanes (as wide as a
// row, at most a warp) of those warps. A row it skips costs a lane two indptr loads, however wide
// the rows; a small graph gives each window up to one worker per row (window_log2 up to
// lanes_log2), so that its written rows still spread over the GPU.
template <bool kFinish, bool kClear, typename Reduce, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    edge_rows_pass(const EdgeSink<Reduce, DType> sink, const OpArgs<DType, IdType> x, int64_t group, int lanes_log2,
                   int window_log2) {
  const Topology<IdType>& g = x.graph;
  const int lane = lane_id();
  const int lanes = 1 << lanes_log2;
  const int64_t warp = global_warp();
  const unsigned worker = unsigned(((warp & ((int64_t(1) << window_log2) - 1)) << (5 - lanes_log2)) + (lane >> lanes_log2));
  const unsigned workers = 1u << (window_log2 + 5 - lanes_log2);
  const int64_t window_step = warp_count() >> window_log2;
  for (int64_t base = (warp >> window_log2) * kWarp; base < g.num_dst; base += window_step * kWarp) {
    const int64_t v = base + lane;
    bool split = false, write = false;
    if (v < g.num_dst) {
      const int64_t degree = g.end(v) - g.begin(v);
      split = row_split(degree, group);
      write = split || ((!kFinish || kClear) && degree == 0);
    }
    const unsigned writes = __ballot_sync(kFullMask, write);
    const unsigned splits = __ballot_sync(kFullMask, split);
    const unsigned count = __popc(writes);
    for (unsigned k = worker; k < count; k += workers) {
      const int r = __fns(writes, 0, int(k) + 1);  // the window's k-th row to write
      edge_row_write<kFinish, kClear, Reduce>(sink, x, (base + r) * x.out_len, (splits >> r) & 1u, lane & (lanes - 1),
                                              lanes);
    }
  }
}

// Warps in all that a row pass aims for (about a full H100: 132 SMs x 64 warps): a graph of fewer
// 32-row windows gives each window several warps (edge_rows_pass).
constexpr int64_t kRowPassWarps = 8192;

// Prepares the target and the empty rows, runs launch(sink) (the strategy's aggregation kernel,
// over the row-aligned units of p.grouping positions) when there are edges, and finishes C. Every
// element of C (and of the args) is written, also where E = 0. A workspace that holds zeros
// (p.workspace_zeroed) needs no preparing: the finishing pass writes the empty rows and leaves it
// zeroed again.
template <typename Reduce, typename DType, typename IdType, typename Launch>
cudaError_t run_edge_aggregation(const UgParams& p, const OpArgs<DType, IdType>& x, cudaStream_t stream,
                                 Launch&& launch) {
  using Sink = EdgeSink<Reduce, DType>;
  if constexpr (!Sink::kSupported) {
    return cudaErrorNotSupported;
  } else {
    if (p.num_dst == 0 || p.out_len == 0) return cudaSuccess;
    const Sink sink{Sink::kPacked || Sink::kStaged ? p.workspace : p.c};
    int lanes_log2 = 0;  // lanes per written row in the row passes: enough for the row, at most a warp
    while ((int64_t(1) << lanes_log2) < p.out_len && lanes_log2 < 5) ++lanes_log2;
    const int64_t windows = ceil_div(p.num_dst, kWarp);
    int window_log2 = 0;  // warps per window of 32 rows: at most one worker per row
    while (window_log2 < lanes_log2 && (windows << (window_log2 + 1)) <= kRowPassWarps) ++window_log2;
    const unsigned grid = grid_for((windows << window_log2) * kWarp);
    constexpr bool kFinished = Sink::kPacked || Sink::kStaged;
    const bool zeroed = kFinished && p.workspace_zeroed;
    if (!zeroed) {
      edge_rows_pass<false, false, Reduce><<<grid, kBlock, 0, stream>>>(sink, x, p.grouping, lanes_log2, window_log2);
      UG_CUDA_TRY(cudaGetLastError());
    }
    if (p.num_edges > 0) {
      launch(sink);
      UG_CUDA_TRY(cudaGetLastError());
    }
    if constexpr (kFinished) {
      if (zeroed) {
        edge_rows_pass<true, true, Reduce><<<grid, kBlock, 0, stream>>>(sink, x, p.grouping, lanes_log2, window_log2);
      } else if (p.num_edges > 0) {
        edge_rows_pass<true, false, Reduce><<<grid, kBlock, 0, stream>>>(sink, x, p.grouping, lanes_log2, window_log2);
      }
      UG_CUDA_TRY(cudaGetLastError());
    }
    return cudaSuccess;
  }
}

}  // namespace ugraph
