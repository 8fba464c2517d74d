// thread_vertex: a worker is one thread; a work unit is (`group` consecutive destination rows,
// feature tile j of `tiles`). Tile j owns output elements j, j + tiles, j + 2 tiles, ..., so the
// consecutive threads that hold consecutive tiles of the same rows touch consecutive addresses.
// Each row's edges are walked serially, so there are no atomics.
#pragma once

#include <algorithm>

#include "common.cuh"
#include "functor.cuh"
#include "launch.h"
#include "static_switch.h"

namespace ugraph {

template <typename Op, typename Reduce, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    thread_vertex_aggregate(const OpArgs<DType, IdType> x, const TileWalk walk, const int group) {
  using Acc = acc_t<DType>;
  const Topology<IdType>& g = x.graph;
  int64_t unit;
  uint32_t tile;
  for (walk.first(global_thread(), unit, tile); unit < walk.units; walk.next(unit, tile)) {
    const int64_t v_begin = unit * group;
    const int64_t v_end = min64(v_begin + group, g.num_dst);
    for (int64_t v = v_begin; v < v_end; ++v) {
      const int64_t p_begin = g.begin(v), p_end = g.end(v);
      for (int64_t e = tile; e < x.out_len; e += walk.tiles) {
        const int64_t ae = Op::use_lhs ? x.a_elem(e) : 0;
        const int64_t be = Op::use_rhs ? x.b_elem(e) : 0;
        Acc acc = Reduce::zero();
        int64_t win_a = 0, win_b = 0;
        for (int64_t p = p_begin; p < p_end; ++p) {
          const int64_t ia = Op::use_lhs ? x.a_rows.at(p, v) : 0;
          const int64_t ib = Op::use_rhs ? x.b_rows.at(p, v) : 0;
          if (Reduce::Call(acc, message<Op>(x, ia, ib, ae, be))) {
            win_a = ia;
            win_b = ib;
          }
        }
        x.store(v * x.out_len + e, x.mean_of(acc, p_end - p_begin), win_a, win_b);
      }
    }
  }
}

template <typename Op, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    thread_vertex_message(const OpArgs<DType, IdType> x, const TileWalk walk, const int group) {
  const Topology<IdType>& g = x.graph;
  int64_t unit;
  uint32_t tile;
  for (walk.first(global_thread(), unit, tile); unit < walk.units; walk.next(unit, tile)) {
    const int64_t v_begin = unit * group;
    const int64_t v_end = min64(v_begin + group, g.num_dst);
    for (int64_t v = v_begin; v < v_end; ++v) {
      const int64_t p_end = g.end(v);
      for (int64_t p = g.begin(v); p < p_end; ++p) {
        const int64_t ia = Op::use_lhs ? x.a_rows.at(p, v) : 0;
        const int64_t ib = Op::use_rhs ? x.b_rows.at(p, v) : 0;
        DType* out = x.c + g.edge(p) * x.out_len;
        for (int64_t e = tile; e < x.out_len; e += walk.tiles) {
          const int64_t ae = Op::use_lhs ? x.a_elem(e) : 0;
          const int64_t be = Op::use_rhs ? x.b_elem(e) : 0;
          out[e] = from_acc<DType>(message<Op>(x, ia, ib, ae, be));
        }
      }
    }
  }
}

template <typename DType, typename IdType>
cudaError_t run_thread_vertex(const UgParams& p, cudaStream_t stream) {
  const OpArgs<DType, IdType> x = make_op_args<DType, IdType>(p);
  const int64_t units = ceil_div(p.num_dst, p.grouping);
  // Tiles past the last element would own nothing.
  const LaunchPlan plan = plan_launch(units, std::min<int64_t>(p.tiling, p.out_len), 1);
  if (units == 0) return cudaSuccess;
  if (p.gather_op == UG_GATHER_NONE) {
    UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
      thread_vertex_message<Op><<<plan.grid, kBlock, 0, stream>>>(x, plan.walk, p.grouping);
    });
  } else {
    UG_GATHER_SWITCH(p.gather_op, DType, Reduce, [&] {
      UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
        thread_vertex_aggregate<Op, Reduce><<<plan.grid, kBlock, 0, stream>>>(x, plan.walk, p.grouping);
      });
    });
  }
  return cudaGetLastError();
}

}  // namespace ugraph
