// The functor contract, with DGL's names (src/array/cuda/functor.cuh) so that every DGL pattern
// maps to one functor: binary::* computes one message element from the operand rows, reduce::*
// folds messages into an accumulator. Half types compute in float (acc_t).
#pragma once

#include <cuda/std/limits>

#include <type_traits>

#include "common.cuh"

namespace ugraph {
namespace binary {

// An operand's value, or 0 for the operand a copy op does not read (its pointer is NULL).
template <bool kUsed, typename DType>
__device__ __forceinline__ acc_t<DType> load_if(const DType* p) {
  if constexpr (kUsed) return load(p);
  else return acc_t<DType>(0);
}

// Call for the element-wise ops: loads what Op reads, then Op::Apply (CRTP, so that each op
// states only its traits and its arithmetic).
template <typename Op, typename DType>
struct Elementwise {
  static __device__ __forceinline__ acc_t<DType> Call(const DType* lhs, const DType* rhs) {
    return Op::Apply(load_if<Op::use_lhs>(lhs), load_if<Op::use_rhs>(rhs));
  }
};

// Traits, as in DGL: use_lhs/use_rhs say which operand a message reads; reduce_last_dim says
// that the message sums reduce_size products (dot), so its operands advance by K per element.
// Apply computes a message element from loaded values (every op but dot), Call from pointers.
template <typename DType>
struct CopyLhs : Elementwise<CopyLhs<DType>, DType> {
  static constexpr bool use_lhs = true, use_rhs = false, reduce_last_dim = false;
  static __device__ __forceinline__ acc_t<DType> Apply(acc_t<DType> lhs, acc_t<DType> rhs) { return lhs; }
};

template <typename DType>
struct CopyRhs : Elementwise<CopyRhs<DType>, DType> {
  static constexpr bool use_lhs = false, use_rhs = true, reduce_last_dim = false;
  static __device__ __forceinline__ acc_t<DType> Apply(acc_t<DType> lhs, acc_t<DType> rhs) { return rhs; }
};

template <typename DType>
struct Add : Elementwise<Add<DType>, DType> {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last_dim = false;
  static __device__ __forceinline__ acc_t<DType> Apply(acc_t<DType> lhs, acc_t<DType> rhs) { return lhs + rhs; }
};

template <typename DType>
struct Sub : Elementwise<Sub<DType>, DType> {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last_dim = false;
  static __device__ __forceinline__ acc_t<DType> Apply(acc_t<DType> lhs, acc_t<DType> rhs) { return lhs - rhs; }
};

template <typename DType>
struct Mul : Elementwise<Mul<DType>, DType> {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last_dim = false;
  static __device__ __forceinline__ acc_t<DType> Apply(acc_t<DType> lhs, acc_t<DType> rhs) { return lhs * rhs; }
};

// IEEE division (the build has no fast math), as torch divides.
template <typename DType>
struct Div : Elementwise<Div<DType>, DType> {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last_dim = false;
  static __device__ __forceinline__ acc_t<DType> Apply(acc_t<DType> lhs, acc_t<DType> rhs) { return lhs / rhs; }
};

template <typename DType>
struct Dot {
  static constexpr bool use_lhs = true, use_rhs = true, reduce_last_dim = true;
  // The sum of lhs[k] * rhs[k] over k = first, first + step, ... < len. A thread sums all
  // products (first 0, step 1); a warp splits one dot over `step` lanes and adds their shares.
  static __device__ __forceinline__ acc_t<DType> Call(const DType* lhs, const DType* rhs, int64_t len, int first,
                                                      int step) {
    acc_t<DType> sum = 0;
    for (int64_t k = first; k < len; k += step) sum += load(lhs + k) * load(rhs + k);
    return sum;
  }
};

}  // namespace binary

namespace reduce {

// Call folds val into acc and returns whether val became the accumulator's value: the kernels
// then record the winner's operand rows (only max/min, whose require_arg is true).
template <typename DType>
struct Sum {
  using Acc = acc_t<DType>;
  static constexpr bool require_arg = false;
  static __host__ __device__ __forceinline__ Acc zero() { return Acc(0); }
  static __device__ __forceinline__ bool Call(Acc& acc, Acc val) {
    acc += val;
    return false;
  }
};

// DGL's ReduceOp::zero(): -inf, or -65504 (the lowest finite value) for float16.
template <typename DType>
struct Max {
  using Acc = acc_t<DType>;
  static constexpr bool require_arg = true, is_min = false;
  static __host__ __device__ __forceinline__ Acc zero() {
    if constexpr (std::is_same_v<DType, __half>) return Acc(-65504.f);
    else return -cuda::std::numeric_limits<Acc>::infinity();
  }
  // Only a strictly greater value wins, so NaN never wins and the first of equal values stays.
  static __device__ __forceinline__ bool Call(Acc& acc, Acc val) {
    if (!(acc < val)) return false;
    acc = val;
    return true;
  }
};

template <typename DType>
struct Min {
  using Acc = acc_t<DType>;
  static constexpr bool require_arg = true, is_min = true;
  static __host__ __device__ __forceinline__ Acc zero() {
    if constexpr (std::is_same_v<DType, __half>) return Acc(65504.f);
    else return cuda::std::numeric_limits<Acc>::infinity();
  }
  static __device__ __forceinline__ bool Call(Acc& acc, Acc val) {
    if (!(val < acc)) return false;
    acc = val;
    return true;
  }
};

}  // namespace reduce

// msg(p, e) of params.h for operand rows ia/ib and element offsets a_elem/b_elem (OpArgs::a_elem),
// or, for a dot, this lane's share of the products (see binary::Dot).
template <typename Op, typename DType, typename IdType>
__device__ __forceinline__ acc_t<DType> message(const OpArgs<DType, IdType>& x, int64_t ia, int64_t ib,
                                                int64_t a_elem, int64_t b_elem, int first = 0, int step = 1) {
  const DType* lhs = Op::use_lhs ? x.a_at(ia, a_elem) : nullptr;
  const DType* rhs = Op::use_rhs ? x.b_at(ib, b_elem) : nullptr;
  if constexpr (Op::reduce_last_dim) {
    return Op::Call(lhs, rhs, x.reduce_size, first, step);
  } else {
    return Op::Call(lhs, rhs);
  }
}

}  // namespace ugraph
