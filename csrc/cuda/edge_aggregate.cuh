// Aggregation in the edge strategies (thread_edge, warp_edge), where several workers may share
// an output row. A worker folds each run of consecutive positions of one row into a private
// accumulator and flushes it once into a target that all workers share:
//   sum, f32/f64 : C itself, cleared first, atomicAdd;
//   sum, f16/bf16: a float workspace, cleared first, atomicAdd, then rounded into C;
//   max/min      : a workspace of packed keys (common.cuh), cleared first, atomicMax, then
//                  decoded into C, arg_a and arg_b.
// A run that covers its whole row has no one to race with and stores instead of an atomic.
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
  // -1 when no message beat the reduce zero); whole says the run is its row's only run.
  __device__ __forceinline__ void flush(int64_t i, Acc acc, int64_t win, bool whole) const {
    if constexpr (kPacked) {
      if (win < 0) return;
      auto* keys = static_cast<unsigned long long*>(target);
      const unsigned long long key = pack_key<Reduce::is_min>(acc, win);
      if (whole) {
        keys[i] = key;
      } else {
        atomicMax(keys + i, key);
      }
    } else {
      auto* out = static_cast<Acc*>(target);
      if (whole) {
        out[i] = acc;
      } else {
        atomicAdd(out + i, acc);
      }
    }
  }

  // The sums of kVec consecutive elements from i on (i a multiple of kVec, the target's rows
  // aligned: see team::with_vector_width) as 16-byte vector atomics where the GPU has them
  // (float4, sm_90 on), a quarter of the atomic operations of one per element.
  template <int kVec>
  __device__ __forceinline__ void flush_sum(int64_t i, const Acc (&acc)[kVec], bool whole) const {
    static_assert(!kPacked, "max/min flush through packed keys");
    // The float4 overload exists only where the GPU has it: the guard keeps the call out of the
    // other architectures' compilation altogether (a discarded branch is still parsed).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr bool kVector = std::is_same_v<Acc, float> && kVec % 4 == 0;
#else
    constexpr bool kVector = false;
#endif
    if constexpr (kVector) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      auto* out = static_cast<float*>(target) + i;
#pragma unroll
      for (int k = 0; k < kVec; k += 4) {
        const float4 v = make_float4(acc[k], acc[k + 1], acc[k + 2], acc[k + 3]);
        if (whole) {
          *reinterpret_cast<float4*>(out + k) = v;
        } else {
          atomicAdd(reinterpret_cast<float4*>(out + k), v);
        }
      }
#endif
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) flush(i + k, acc[k], -1, whole);
    }
  }
};

template <typename DType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    round_staged_sum(const float* __restrict__ staged, DType* __restrict__ c, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += thread_count()) c[i] = from_acc<DType>(staged[i]);
}

template <typename Reduce, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    decode_packed(const unsigned long long* __restrict__ keys, const OpArgs<DType, IdType> x, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += thread_count()) {
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

// Clears the target, runs launch(sink) (the strategy's aggregation kernel) when there are
// edges, and finishes C. Every element of C (and of the args) is written, also where E = 0.
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
                                                                 x, n);
      UG_CUDA_TRY(cudaGetLastError());
    } else if constexpr (Sink::kStaged) {
      round_staged_sum<<<grid_for(n), kBlock, 0, stream>>>(static_cast<const float*>(sink.target), x.c, n);
      UG_CUDA_TRY(cudaGetLastError());
    }
    return cudaSuccess;
  }
}

}  // namespace ugraph
