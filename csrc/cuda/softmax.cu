// The fused edge softmax (softmax.h). A team of 2^k lanes takes one destination row at a time,
// as many lanes as a row of the average in-degree needs to hold kHold positions each (at most a
// warp); rows are taken warp-uniformly, so every lane of a warp reaches every shuffle, and the
// team combines its lanes' maxima and sums by an xor butterfly. Elements of an edge row are taken
// kChunk at a time. A row that fits the team (kHold positions a lane) is loaded once, every edge
// id and score in flight together, and its three passes (max, sum, write) run on registers; a
// longer row is read again in each pass, from cache after the first.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "common.cuh"
#include "entry.h"
#include "functor.cuh"
#include "softmax.h"
#include "static_switch.h"

namespace ugraph {
namespace {

constexpr int kChunk = 4;  // elements of an edge row per pass
constexpr int kHold = 4;   // positions a lane holds in registers

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

// kBackward false: out = exp(x - max) / sum over the row of exp(x - max).
// kBackward true: x is the forward's output, y = x * (output gradient): out = y - x * sum(y).
template <typename DType, typename IdType, bool kBackward>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    edge_softmax_rows(const UgSoftmaxParams p, const int lanes_log2) {
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
  for (int64_t base = global_warp() * teams; base < p.num_dst; base += warp_count() * teams) {
    const int64_t v = base + (lane_id() >> lanes_log2);
    const int64_t begin = v < p.num_dst ? load_index(indptr + v) : 0;
    const int64_t end = v < p.num_dst ? load_index(indptr + v + 1) : 0;
    const bool held = end - begin <= int64_t(kHold) * lanes;  // the team's own branch
    // The held positions' edge rows (-1: past the row's end).
    int64_t row[kHold];
#pragma unroll
    for (int h = 0; h < kHold; ++h) {
      const int64_t q = begin + t + int64_t(h) * lanes;
      row[h] = held && q < end ? (eid ? load_index(eid + q) : q) * len : -1;
    }
    for (int64_t j0 = 0; j0 < len; j0 += kChunk) {
      const int n = static_cast<int>(min64(kChunk, len - j0));
      Acc hx[kHold][kChunk], hy[kHold][kChunk];
      if (held) {
#pragma unroll
        for (int h = 0; h < kHold; ++h) {
#pragma unroll
          for (int k = 0; k < kChunk; ++k) {
            const bool live = row[h] >= 0 && k < n;
            hx[h][k] = live ? load(x + row[h] + j0 + k) : Acc(0);
            if constexpr (kBackward) hy[h][k] = live ? load(y + row[h] + j0 + k) : Acc(0);
          }
        }
      }
      // f(edge row, k, x, y) for every element of this lane's positions: from the registers of a
      // held row, else loaded (the loop over the positions of a long row).
      auto each = [&](auto&& f) {
        if (held) {
#pragma unroll
          for (int h = 0; h < kHold; ++h) {
#pragma unroll
            for (int k = 0; k < kChunk; ++k) {
              if (row[h] >= 0 && k < n) f(row[h], k, hx[h][k], kBackward ? hy[h][k] : Acc(0));
            }
          }
          return;
        }
        for (int64_t q = begin + t; q < end; q += lanes) {
          const int64_t r = (eid ? load_index(eid + q) : q) * len;
#pragma unroll
          for (int k = 0; k < kChunk; ++k) {
            if (k < n) f(r, k, load(x + r + j0 + k), kBackward ? load(y + r + j0 + k) : Acc(0));
          }
        }
      };
      Acc top[kChunk], sum[kChunk];
#pragma unroll
      for (int k = 0; k < kChunk; ++k) {
        top[k] = reduce::Max<DType>::zero();
        sum[k] = Acc(0);
      }
      if constexpr (!kBackward) {
        each([&](int64_t, int k, Acc s, Acc) {
          if (top[k] < s) top[k] = s;
        });
#pragma unroll
        for (int k = 0; k < kChunk; ++k) top[k] = team_max(top[k], lanes);
      }
      each([&](int64_t, int k, Acc s, Acc w) { sum[k] += kBackward ? w : exp_acc(s - top[k]); });
#pragma unroll
      for (int k = 0; k < kChunk; ++k) sum[k] = lane_group_sum(sum[k], lanes);
      each([&](int64_t r, int k, Acc s, Acc w) {
        out[r + j0 + k] = from_acc<DType>(kBackward ? w - s * sum[k] : exp_acc(s - top[k]) / sum[k]);
      });
    }
  }
}

std::string check(const UgSoftmaxParams* p, bool backward) {
  if (!p) return "params is NULL";
  if (p->index_bits != 32 && p->index_bits != 64) return "index_bits must be 32 or 64, got " + std::to_string(p->index_bits);
  if (p->num_dst < 0 || p->num_edges < 0 || p->len < 0) return "negative size";
  if (p->index_bits == 32 && p->num_edges > INT32_MAX) return "num_edges does not fit 32-bit indices";
  if (p->dtype < UG_F32 || p->dtype > UG_BF16) return "unknown dtype " + std::to_string(p->dtype);
  if (!p->indptr) return "indptr is NULL";
  if (p->num_edges > 0 && p->len > 0 && (!p->x || !p->out || (backward && !p->y)))
    return std::string("x, out") + (backward ? " and y" : "") + " must be set when there are elements";
  return "";
}

int run(const UgSoftmaxParams* p, void* stream, bool backward) {
  const std::string why = check(p, backward);
  if (!why.empty()) {
    set_last_error(why);
    return UG_ERR_INVALID;
  }
  if (p->num_dst == 0 || p->num_edges == 0 || p->len == 0) return UG_OK;
  int lanes_log2 = 0;  // lanes per row: enough to hold a row of the average in-degree, at most a warp
  while ((int64_t(kHold) << lanes_log2) * p->num_dst < p->num_edges && lanes_log2 < 5) ++lanes_log2;
  const int64_t warps = ceil_div(p->num_dst, int64_t(kWarp) >> lanes_log2);
  const auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t err = UG_DTYPE_SWITCH(p->dtype, DType, [&] {
    return UG_INDEX_SWITCH(p->index_bits, IdType, [&] {
      if (backward) {
        edge_softmax_rows<DType, IdType, true><<<grid_for(warps * kWarp), kBlock, 0, s>>>(*p, lanes_log2);
      } else {
        edge_softmax_rows<DType, IdType, false><<<grid_for(warps * kWarp), kBlock, 0, s>>>(*p, lanes_log2);
      }
      return cudaGetLastError();
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

extern "C" int ug_cuda_edge_softmax_forward(const UgSoftmaxParams* p, void* stream) {
  return ugraph::run(p, stream, false);
}
extern "C" int ug_cuda_edge_softmax_backward(const UgSoftmaxParams* p, void* stream) {
  return ugraph::run(p, stream, true);
}
