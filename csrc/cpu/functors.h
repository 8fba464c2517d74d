// DGL's operator functors (dgl/src/array/cpu/spmm_binary_ops.h, sddmm.h), restated on the
// accumulation type: the kernels load both operands, convert them once, and call these.
#ifndef UGRAPH_CPU_FUNCTORS_H_
#define UGRAPH_CPU_FUNCTORS_H_

#include <limits>
#include <type_traits>

#include "half.h"
#include "simd.h"

namespace ugraph {
namespace cpu {
namespace binary {

// use_lhs/use_rhs say which operands are read; reduce_last marks Dot, whose message sums
// reduce_size products instead of combining one element of each side.
struct Add {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last = false;
  template <typename A> UG_INLINE static A Call(A x, A y) { return x + y; }
};
struct Sub {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last = false;
  template <typename A> UG_INLINE static A Call(A x, A y) { return x - y; }
};
struct Mul {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last = false;
  template <typename A> UG_INLINE static A Call(A x, A y) { return x * y; }
};
struct Div {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last = false;
  template <typename A> UG_INLINE static A Call(A x, A y) { return x / y; }
};
struct CopyLhs {
  static constexpr bool use_lhs = true, use_rhs = false, reduce_last = false;
  template <typename A> UG_INLINE static A Call(A x, A) { return x; }
};
struct CopyRhs {
  static constexpr bool use_lhs = false, use_rhs = true, reduce_last = false;
  template <typename A> UG_INLINE static A Call(A, A y) { return y; }
};
struct Dot {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last = true;
  template <typename A> UG_INLINE static A Call(A x, A y) { return x * y; }  // one product of the sum
};

}  // namespace binary

namespace reduce {

// c ? x : y for the winner index, as bit masks: written as ?: GCC turns the pair of selects in
// Fold into masked stores behind a "did any lane change" branch, which mispredicts on every
// early edge of a row; the masks keep the update a branch-free blend.
template <typename W> UG_INLINE W Select(bool c, W x, W y) {
  const W m = W(0) - W(c);
  return (x & m) | (y & ~m);
}

struct Sum {
  static constexpr bool is_cmp = false;
  template <typename T> static typename Scalar<T>::Acc zero() { return 0; }
};

// DGL's ReduceOp::zero(): float16 cannot hold the float infinities' role in DGL's CUDA
// kernels, so DGL starts float16 at the largest finite half. Replacement needs a strictly
// better message, so NaN never wins and the earliest of equal messages keeps its place.
struct Max {
  static constexpr bool is_cmp = true;
  template <typename T> static typename Scalar<T>::Acc zero() {
    using Acc = typename Scalar<T>::Acc;
    return std::is_same<T, Half>::value ? Acc(-65504.0f) : -std::numeric_limits<Acc>::infinity();
  }
  template <typename A, typename W> UG_INLINE static void Fold(A& acc, W& win, A msg, W pos) {
    const bool take = msg > acc;
    acc = take ? msg : acc;
    win = Select(take, pos, win);
  }
  template <typename A, typename W> UG_INLINE static void Merge(A& acc, W& win, A part, W part_win) {
    Fold(acc, win, part, part_win);
  }
};

struct Min {
  static constexpr bool is_cmp = true;
  template <typename T> static typename Scalar<T>::Acc zero() {
    using Acc = typename Scalar<T>::Acc;
    return std::is_same<T, Half>::value ? Acc(65504.0f) : std::numeric_limits<Acc>::infinity();
  }
  template <typename A, typename W> UG_INLINE static void Fold(A& acc, W& win, A msg, W pos) {
    const bool take = msg < acc;
    acc = take ? msg : acc;
    win = Select(take, pos, win);
  }
  template <typename A, typename W> UG_INLINE static void Merge(A& acc, W& win, A part, W part_win) {
    Fold(acc, win, part, part_win);
  }
};

}  // namespace reduce
}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_FUNCTORS_H_
