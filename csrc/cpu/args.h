// The typed view of a validated UgParams that every kernel reads.
#ifndef UGRAPH_CPU_ARGS_H_
#define UGRAPH_CPU_ARGS_H_

#include <cstdint>

#include "half.h"
#include "simd.h"

namespace ugraph {
namespace cpu {

// One input tensor: row r starts at data + r * stride. index maps a position p to r (col, row
// or eid); NULL means r == p, an edge tensor whose edge ids are the CSC positions.
template <typename T, typename I>
struct Operand {
  const T* data = nullptr;
  int64_t stride = 0;
  int64_t len = 0;  // elements a row holds (a_len * reduce_size)
  const I* index = nullptr;

  UG_INLINE int64_t id(int64_t p) const { return index ? int64_t(index[p]) : p; }
  UG_INLINE const T* at(int64_t p) const { return data + id(p) * stride; }
};

template <typename T, typename I>
struct Args {
  int64_t num_dst = 0, num_edges = 0;
  const I* indptr = nullptr;
  Operand<T, I> a, b;
  const I* out_index = nullptr;  // gather none: C row of position p (eid; NULL = p)
  T* c = nullptr;
  I* arg_a = nullptr;  // NULL when not wanted
  I* arg_b = nullptr;
  bool wide_args = false;  // params.h's arg_bits 64 on a 32-bit graph: arg_a and arg_b hold int64_t
  int64_t out_len = 0;
  int64_t reduce_size = 1;   // K: products per dot message
  bool mean = false;         // gather mean: each row's sums are divided by its degree (at least 1)
  // Broadcast (the kernels' Bcast instances only): element j reads A at a_off[j] and B at
  // b_off[j], and runs of `run` elements step through A and B by a_step and b_step (broadcast.h).
  const int64_t* a_off = nullptr;
  const int64_t* b_off = nullptr;
  int64_t run = 1;
  int a_step = 1, b_step = 1;
  bool heads = false;  // Runs::heads
  // Whether the kernels prefetch gathered rows: only when the rows they gather at random
  // outgrow the caches. Where they fit, a prefetch per edge is pure instruction cost (a third
  // slower on a 5K-node graph at 16-64 features).
  bool prefetch = true;
};

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_ARGS_H_
