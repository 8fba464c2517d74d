// msg(p, j): the output elements of edge_op for one edge, in the accumulation type.
#ifndef UGRAPH_CPU_MESSAGE_H_
#define UGRAPH_CPU_MESSAGE_H_

#include <cstdint>
#include <type_traits>

#include "args.h"
#include "half.h"
#include "simd.h"

namespace ugraph {
namespace cpu {

template <typename T, typename I, typename Op, bool Bcast>
struct Message {
  using Acc = typename Scalar<T>::Acc;
  using Step = std::integral_constant<int, 1>;
  using Stay = std::integral_constant<int, 0>;

  // Element i of a run whose A and B elements start at a and b and advance by SA and SB.
  template <int SA, int SB>
  UG_INLINE static Acc element(const T* a, const T* b, int64_t i) {
    Acc x = 0, y = 0;
    if constexpr (Op::use_lhs) x = Scalar<T>::load(a[SA * i]);
    if constexpr (Op::use_rhs) y = Scalar<T>::load(b[SB * i]);
    return Op::Call(x, y);
  }

  // Splits output elements [j0, j0 + n) of a non-dot message into runs and calls
  // body(SA, SB, j, len, a_run, b_run) for each: elements [j0 + j, j0 + j + len) read A and B
  // from a_run and b_run with steps SA and SB (compile-time 0 or 1), so the body's loop over
  // a run is a plain simd loop. Without broadcast it is one run of n with both steps 1. A
  // fixed width n (std::integral_constant) that fits inside one run stays a constant.
  template <typename N, typename Body>
  UG_INLINE static void runs(const Args<T, I>& g, const T* a, const T* b, int64_t j0, N n, Body&& body) {
    if constexpr (!Bcast) {
      body(Step{}, Step{}, 0, n, Op::use_lhs ? a + j0 : a, Op::use_rhs ? b + j0 : b);
    } else {
      if constexpr (!std::is_integral<N>::value) {
        if (j0 % g.run + N::value <= g.run) return run(g, a, b, j0, 0, n, body);
      }
      for (int64_t j = 0; j < int64_t(n);) {
        const int64_t left = g.run - (j0 + j) % g.run;
        const int64_t len = left < int64_t(n) - j ? left : int64_t(n) - j;
        run(g, a, b, j0, j, len, body);
        j += len;
      }
    }
  }

  // One broadcast run: elements [j0 + j, j0 + j + len), with its steps as types.
  template <typename N, typename Body>
  UG_INLINE static void run(const Args<T, I>& g, const T* a, const T* b, int64_t j0, int64_t j, N len, Body&& body) {
    const T* ar = Op::use_lhs ? a + g.a_off[j0 + j] : a;
    const T* br = Op::use_rhs ? b + g.b_off[j0 + j] : b;
    if (g.a_step && g.b_step) body(Step{}, Step{}, j, len, ar, br);
    else if (g.a_step) body(Step{}, Stay{}, j, len, ar, br);
    else body(Stay{}, Step{}, j, len, ar, br);
  }

  // A dot message: the sum of K products of contiguous runs.
  UG_INLINE static Acc dot(const T* a, const T* b, int64_t k) {
    Acc s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < k; ++i) s += Op::Call(Scalar<T>::load(a[i]), Scalar<T>::load(b[i]));
    return s;
  }

  // Start of the run that output element j (absolute) of a dot message reads in each operand.
  UG_INLINE static int64_t run_a(const Args<T, I>& g, int64_t j) { return (Bcast ? g.a_off[j] : j) * g.reduce_size; }
  UG_INLINE static int64_t run_b(const Args<T, I>& g, int64_t j) { return (Bcast ? g.b_off[j] : j) * g.reduce_size; }

  // Prefetches what position p will read from operands gathered at random (src, or edge
  // through eid) for output elements [j0, j0 + n). Broadcast offsets may land anywhere in a
  // row, so then the whole row is fetched.
  UG_INLINE static void prefetch(const Args<T, I>& g, int64_t p, int64_t j0, int64_t n) {
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
