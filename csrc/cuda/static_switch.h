// Turns run-time enums of UgParams into compile-time constants, in the style of
// flash-attention's static_switch.h:
//
//   UG_DTYPE_SWITCH(p.dtype, DType, [&] { return run<DType>(p); });
//
// The last argument is a lambda; each branch gives it a different constant or type alias.
// Every enum value must already have been validated (ug_cuda_check): the last branch of each
// switch is the catch-all.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "functor.cuh"
#include "ugraph/params.h"

// UgDType -> the element type.
#define UG_DTYPE_SWITCH(CODE, TYPE, ...)   \
  [&] {                                    \
    if ((CODE) == UG_F32) {                \
      using TYPE = float;                  \
      return __VA_ARGS__();                \
    } else if ((CODE) == UG_F64) {         \
      using TYPE = double;                 \
      return __VA_ARGS__();                \
    } else if ((CODE) == UG_F16) {         \
      using TYPE = __half;                 \
      return __VA_ARGS__();                \
    } else {                               \
      using TYPE = __nv_bfloat16;          \
      return __VA_ARGS__();                \
    }                                      \
  }()

// index_bits -> the index type of indptr, col, row, eid, arg_a and arg_b.
#define UG_INDEX_SWITCH(BITS, TYPE, ...) \
  [&] {                                  \
    if ((BITS) == 32) {                  \
      using TYPE = int32_t;              \
      return __VA_ARGS__();              \
    } else {                             \
      using TYPE = int64_t;              \
      return __VA_ARGS__();              \
    }                                    \
  }()

// UgEdgeOp -> the binary functor. Each op is its own instantiation: with the op chosen at run
// time inside the edge loop, the compiler cannot batch the loads of successive edges, and
// u_mul_e-sum measured about 2x slower than copy_u-sum on the same graph.
#define UG_EDGE_OP_SWITCH(OP, DTYPE, FUNCTOR, ...)      \
  [&] {                                                 \
    if ((OP) == UG_COPY_LHS) {                          \
      using FUNCTOR = ::ugraph::binary::CopyLhs<DTYPE>; \
      return __VA_ARGS__();                             \
    } else if ((OP) == UG_COPY_RHS) {                   \
      using FUNCTOR = ::ugraph::binary::CopyRhs<DTYPE>; \
      return __VA_ARGS__();                             \
    } else if ((OP) == UG_ADD) {                        \
      using FUNCTOR = ::ugraph::binary::Add<DTYPE>;     \
      return __VA_ARGS__();                             \
    } else if ((OP) == UG_SUB) {                        \
      using FUNCTOR = ::ugraph::binary::Sub<DTYPE>;     \
      return __VA_ARGS__();                             \
    } else if ((OP) == UG_MUL) {                        \
      using FUNCTOR = ::ugraph::binary::Mul<DTYPE>;     \
      return __VA_ARGS__();                             \
    } else if ((OP) == UG_DIV) {                        \
      using FUNCTOR = ::ugraph::binary::Div<DTYPE>;     \
      return __VA_ARGS__();                             \
    } else {                                            \
      using FUNCTOR = ::ugraph::binary::Dot<DTYPE>;     \
      return __VA_ARGS__();                             \
    }                                                   \
  }()

// UgGatherOp sum/max/min/mean -> the reduce functor. A mean is a sum (OpArgs::mean divides at the
// store). UG_GATHER_NONE is message creation, which has its own kernels and never reaches this
// switch.
#define UG_GATHER_SWITCH(GATHER, DTYPE, FUNCTOR, ...) \
  [&] {                                               \
    if ((GATHER) == UG_SUM || (GATHER) == UG_MEAN) {  \
      using FUNCTOR = ::ugraph::reduce::Sum<DTYPE>;   \
      return __VA_ARGS__();                           \
    } else if ((GATHER) == UG_MAX) {                  \
      using FUNCTOR = ::ugraph::reduce::Max<DTYPE>;   \
      return __VA_ARGS__();                           \
    } else {                                          \
      using FUNCTOR = ::ugraph::reduce::Min<DTYPE>;   \
      return __VA_ARGS__();                           \
    }                                                 \
  }()
