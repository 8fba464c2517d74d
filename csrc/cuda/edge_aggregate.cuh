// Aggregation in the edge strategies (thread_edge, warp_edge), where several workers may share
// an output row. A worker folds each run of consecutive positions of one row into a private
// accumulator. A run that holds its whole row (the row lies in one unit of `group` positions) has
// no one to race with: it stores C, and for max/min the args, directly. Every other run is
// flushed once into a target that all workers share:
//   sum, f32/f64 : C itself, cleared first, atomicAdd;
//   sum, f16/bf16: a float workspace, cleared first, atomicAdd, then rounded into C;
//   max/min      : a workspace of packed keys (common.cuh), cleared first, atomicMax, then
//                  decoded into C, arg_a and arg_b.
// The finishing pass of a workspace visits only the rows that were split over units (and the
// empty rows, which no worker visits), so on a graph whose rows mostly fit a unit the workspace
// costs little beyond its clearing.
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
  static constexpr size_t kElementBytes = kPacked ? sizeof(unsigned long long) : sizeof(Acc);

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
  // the target's rows aligned: see team::with_vector_width), as 16-byte vector atomics where the
  // GPU has them (float4, sm_90 on), a quarter of the atomic operations of one per element.
  template <int kVec>
  __device__ __forceinline__ void flush_partial_sum(int64_t i, const Acc (&acc)[kVec]) const {
    static_assert(!kPacked, "max/min flush through packed keys");
    // The float4 overload exists only where the GPU has it: the guard keeps the call out of the
    // other architectures' compilation altogether (a discarded branch is still parsed).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr bool kVector = std::is_same_v<Acc, float> && kVec % 4 == 0;
#else
    constexpr bool kVector = false;
#endif
    auto* out = static_cast<Acc*>(target) + i;
    if constexpr (kVector) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#pragma unroll
      for (int k = 0; k < kVec; k += 4) {
        atomicAdd(reinterpret_cast<float4*>(out + k), make_float4(acc[k], acc[k + 1], acc[k + 2], acc[k + 3]));
      }
#endif
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) atomicAdd(out + k, acc[k]);
    }
  }
};

// Whether the row of output element i was split over units of `group` positions, so that its
// value is in the workspace; an empty row (*empty) was visited by no worker at all. The
// divisions run in 32 bits where the operands fit (a 64-bit division is a slow subroutine).
template <typename IdType>
__device__ __forceinline__ bool row_split(const Topology<IdType>& g, int64_t i, int64_t out_len, int64_t group,
                                          bool* empty) {
  auto div = [](int64_t a, int64_t b) -> int64_t {
    return (a >> 31) == 0 ? int64_t(uint32_t(a) / uint32_t(b)) : a / b;
  };
  const int64_t v = div(i, out_len);
  const int64_t b = g.begin(v), e = g.end(v);
  *empty = b == e;
  return b < e && div(b, group) != div(e - 1, group);
}

template <typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    round_staged_sum(const float* __restrict__ staged, const OpArgs<DType, IdType> x, int64_t n, int64_t group) {
  for (int64_t i = global_thread(); i < n; i += thread_count()) {
    bool empty;
    if (row_split(x.graph, i, x.out_len, group, &empty) || empty) x.c[i] = from_acc<DType>(staged[i]);
  }
}

template <typename Reduce, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    decode_packed(const unsigned long long* __restrict__ keys, const OpArgs<DType, IdType> x, int64_t n,
                  int64_t group) {
  for (int64_t i = global_thread(); i < n; i += thread_count()) {
    bool empty;
    if (!row_split(x.graph, i, x.out_len, group, &empty) && !empty) continue;
    const unsigned long long key = keys[i];
    if (key == 0) {
      x.store(i, Reduce::zero(), 0, 0);
      continue;
    }
    const int64_t pos = key_position(key);
    x.store(i, key_value<Reduce::is_min>(static_cast<uint32_t>(key >> 32)),
            x.arg_a && x.a_rows.used ? x.a_rows.at(pos) : 0, x.arg_b && x.b_rows.used ? x.b_rows.at(pos) : 0);
  }
}

// Clears the target, runs launch(sink) (the strategy's aggregation kernel, over units of
// p.grouping positions) when there are edges, and finishes C. Every element of C (and of the
// args) is written, also where E = 0.
template <typename Reduce, typename DType, typename IdType, typename Launch>
cudaError_t run_edge_aggregation(const UgParams& p, const OpArgs<DType, IdType>& x, cudaStream_t stream,
                                 Launch&& launch) {
  using Sink = EdgeSink<Reduce, DType>;
  if constexpr (!Sink::kSupported) {
    return cudaErrorNotSupported;
  } else {
    const int64_t n = p.num_dst * p.out_len;
    if (n == 0) return cudaSuccess;
    const Sink sink{Sink::kPacked || Sink::kStaged ? p.workspace : p.c};
    UG_CUDA_TRY(cudaMemsetAsync(sink.target, 0, static_cast<size_t>(n) * Sink::kElementBytes, stream));
    if (p.num_edges > 0) {
      launch(sink);
      UG_CUDA_TRY(cudaGetLastError());
    }
    if constexpr (Sink::kPacked) {
      decode_packed<Reduce><<<grid_for(n), kBlock, 0, stream>>>(static_cast<const unsigned long long*>(sink.target),
                                                                 x, n, p.grouping);
      UG_CUDA_TRY(cudaGetLastError());
    } else if constexpr (Sink::kStaged) {
      round_staged_sum<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const float*>(sink.target), x, n,
                                                            p.grouping);
      UG_CUDA_TRY(cudaGetLastError());
    }
    return cudaSuccess;
  }
}

}  // namespace ugraph
