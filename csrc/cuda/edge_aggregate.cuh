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
// indptr entries per row otherwise.
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

  // Folds the aggregate of one run into output element i. win is the winning position (max/min;
  // -1 when no message beat the reduce zero, and acc is then that zero); whole says the run is
  // its row's only run.
  template <typename IdType>
  __device__ __forceinline__ void flush(const OpArgs<DType, IdType>& x, int64_t i, Acc acc, int64_t win,
                                        bool whole) const {
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

// One pass over the destination rows, a team of 2^lanes_log2 lanes (at most 8) per row, its
// lanes over the row's elements. kFinish false (before the aggregation): clears the target's
// split rows and writes the empty rows of C (the reduce zero, args 0). kFinish true (after it):
// decodes the keys or rounds the float workspace of the split rows into C. Every lane reads its
// row's degree itself, so no lane waits on another: on a small graph the pass costs about one
// launch, and on a large one about two index loads per row.
template <bool kFinish, typename Reduce, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    edge_rows_pass(const EdgeSink<Reduce, DType> sink, const OpArgs<DType, IdType> x, int64_t group,
                   int lanes_log2) {
  using Sink = EdgeSink<Reduce, DType>;
  const Topology<IdType>& g = x.graph;
  const int lanes = 1 << lanes_log2;
  const int lane = threadIdx.x & (lanes - 1);
  for (int64_t v = global_thread() >> lanes_log2; v < g.num_dst; v += thread_count() >> lanes_log2) {
    const int64_t degree = g.end(v) - g.begin(v);
    const bool split = row_split(degree, group);
    if (kFinish ? !split : !split && degree != 0) continue;
    const int64_t first = v * x.out_len;
    for (int64_t j = lane; j < x.out_len; j += lanes) {
      const int64_t i = first + j;
      if constexpr (kFinish) {
        if constexpr (Sink::kPacked) {
          const unsigned long long key = static_cast<const unsigned long long*>(sink.target)[i];
          if (key == 0) {  // nothing beat the reduce zero
            x.store(i, Reduce::zero(), 0, 0);
          } else {
            const int64_t pos = key_position(key);
            x.store(i, key_value<Reduce::is_min>(static_cast<uint32_t>(key >> 32)),
                    x.arg_a && x.a_rows.used ? x.a_rows.at(pos) : 0, x.arg_b && x.b_rows.used ? x.b_rows.at(pos) : 0);
          }
        } else if constexpr (Sink::kStaged) {
          x.c[i] = from_acc<DType>(static_cast<const float*>(sink.target)[i]);
        }
      } else if (split) {
        static_cast<typename Sink::Element*>(sink.target)[i] = typename Sink::Element(0);
      } else {
        x.store(i, Reduce::zero(), 0, 0);
      }
    }
  }
}

// Prepares the target and the empty rows, runs launch(sink) (the strategy's aggregation kernel,
// over the row-aligned units of p.grouping positions) when there are edges, and finishes C. Every
// element of C (and of the args) is written, also where E = 0.
template <typename Reduce, typename DType, typename IdType, typename Launch>
cudaError_t run_edge_aggregation(const UgParams& p, const OpArgs<DType, IdType>& x, cudaStream_t stream,
                                 Launch&& launch) {
  using Sink = EdgeSink<Reduce, DType>;
  if constexpr (!Sink::kSupported) {
    return cudaErrorNotSupported;
  } else {
    if (p.num_dst == 0 || p.out_len == 0) return cudaSuccess;
    const Sink sink{Sink::kPacked || Sink::kStaged ? p.workspace : p.c};
    int lanes_log2 = 0;  // lanes per row in the row passes: enough for the row, at most 8
    while ((int64_t(1) << lanes_log2) < p.out_len && lanes_log2 < 3) ++lanes_log2;
    const unsigned grid = grid_for(p.num_dst << lanes_log2);
    edge_rows_pass<false, Reduce><<<grid, kBlock, 0, stream>>>(sink, x, p.grouping, lanes_log2);
    UG_CUDA_TRY(cudaGetLastError());
    if (p.num_edges > 0) {
      launch(sink);
      UG_CUDA_TRY(cudaGetLastError());
      if constexpr (Sink::kPacked || Sink::kStaged) {
        edge_rows_pass<true, Reduce><<<grid, kBlock, 0, stream>>>(sink, x, p.grouping, lanes_log2);
        UG_CUDA_TRY(cudaGetLastError());
      }
    }
    return cudaSuccess;
  }
}

}  // namespace ugraph
