// msg(p, j): one output element of edge_op for one edge, in the accumulation type.
#ifndef UGRAPH_CPU_MESSAGE_H_
#define UGRAPH_CPU_MESSAGE_H_

#include <cstdint>

#include "args.h"
#include "half.h"
#include "simd.h"

namespace ugraph {
namespace cpu {

template <typename T, typename I, typename Op, bool Bcast>
struct Message {
  using Acc = typename Scalar<T>::Acc;

  // Element j of a non-dot message. a and b are the operand rows; without broadcast they are
  // already advanced to the block's first feature, with it aoff/boff are.
  static Acc element(const T* a, const T* b, const int64_t* aoff, const int64_t* boff, int64_t j) {
    Acc x = 0, y = 0;
    if constexpr (Op::use_lhs) x = Scalar<T>::load(a[Bcast ? aoff[j] : j]);
    if constexpr (Op::use_rhs) y = Scalar<T>::load(b[Bcast ? boff[j] : j]);
    return Op::Call(x, y);
  }

  // A dot message: the sum of K products of contiguous runs.
  static Acc dot(const T* a, const T* b, int64_t k) {
    Acc s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < k; ++i) s += Op::Call(Scalar<T>::load(a[i]), Scalar<T>::load(b[i]));
    return s;
  }

  // Start of the run that output element j (absolute) of a dot message reads in each operand.
  static int64_t run_a(const Args<T, I>& g, int64_t j) { return (Bcast ? g.a_off[j] : j) * g.reduce_size; }
  static int64_t run_b(const Args<T, I>& g, int64_t j) { return (Bcast ? g.b_off[j] : j) * g.reduce_size; }

  // Prefetches what position p will read from operands gathered at random (src, or edge
  // through eid) for output elements [j0, j0 + n). Broadcast offsets may land anywhere in a
  // row, so then the whole row is fetched.
  static void prefetch(const Args<T, I>& g, int64_t p, int64_t j0, int64_t n) {
    const int64_t k = g.reduce_size;
    if (Op::use_lhs && g.a.index)
      prefetch_span(g.a.at(p) + (Bcast ? 0 : j0 * k), (Bcast ? g.a.len : n * k) * int64_t(sizeof(T)));
    if (Op::use_rhs && g.b.index)
      prefetch_span(g.b.at(p) + (Bcast ? 0 : j0 * k), (Bcast ? g.b.len : n * k) * int64_t(sizeof(T)));
  }
};

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_MESSAGE_H_
