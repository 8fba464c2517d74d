// thread_edge: a worker is one thread; a work unit is (about `group` consecutive positions in CSC
// order, row-aligned as in edge_aggregate.cuh, feature tile j of `tiles`),
// tiles interleaved over the elements as in thread_vertex.
// Message creation writes each position's own output row. Aggregation keeps one accumulator
// while the destination stays the same and flushes it through edge_aggregate.cuh when the row
// changes or the group ends.
#pragma once

#include <algorithm>

#include "common.cuh"
#include "edge_aggregate.cuh"
#include "functor.cuh"
#include "launch.h"
#include "static_switch.h"

namespace ugraph {

template <typename Op, typename Reduce, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    thread_edge_aggregate(const OpArgs<DType, IdType> x, const TileWalk walk, const int group,
                          const EdgeSink<Reduce, DType> sink) {
  using Acc = acc_t<DType>;
  const Topology<IdType>& g = x.graph;
  int64_t unit;
  uint32_t tile;
  for (walk.first(global_thread(), unit, tile); unit < walk.units; walk.next(unit, tile)) {
    const int64_t p_begin = unit_start(g, unit, group);
    const int64_t p_end = unit_start(g, unit + 1, group);
    if (p_begin >= p_end) continue;  // a unit past the last row that starts in it
    // A run that touches an end of the unit covers its whole row only if the position just
    // outside that end belongs to another row (-1: there is none).
    const int64_t row_before = p_begin > 0 ? g.dst(p_begin - 1) : -1;
    const int64_t row_after = p_end < g.num_edges ? g.dst(p_end) : -1;
    for (int64_t e = tile; e < x.out_len; e += walk.tiles) {
      const int64_t ae = Op::use_lhs ? x.a_elem(e) : 0;
      const int64_t be = Op::use_rhs ? x.b_elem(e) : 0;
      int64_t run_row = g.dst(p_begin), run_begin = p_begin, win = -1;
      Acc acc = Reduce::zero();
      for (int64_t p = p_begin; p < p_end; ++p) {
        const int64_t v = g.dst(p);
        if (v != run_row) {
          sink.flush(x, run_row, e, acc, win, run_begin > p_begin || row_before != run_row);
          run_row = v;
          run_begin = p;
          acc = Reduce::zero();
          win = -1;
        }
        const int64_t ia = Op::use_lhs ? x.a_rows.at(p, v) : 0;
        const int64_t ib = Op::use_rhs ? x.b_rows.at(p, v) : 0;
        if (Reduce::Call(acc, message<Op>(x, ia, ib, ae, be))) win = p;
      }
      sink.flush(x, run_row, e, acc, win,
                 (run_begin > p_begin || row_before != run_row) && row_after != run_row);
    }
  }
}

template <typename Op, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    thread_edge_message(const OpArgs<DType, IdType> x, const TileWalk walk, const int group) {
  const Topology<IdType>& g = x.graph;
  int64_t unit;
  uint32_t tile;
  for (walk.first(global_thread(), unit, tile); unit < walk.units; walk.next(unit, tile)) {
    const int64_t p_begin = unit * group;
    const int64_t p_end = min64(p_begin + group, g.num_edges);
    for (int64_t p = p_begin; p < p_end; ++p) {
      const int64_t ia = Op::use_lhs ? x.a_rows.at(p) : 0;
      const int64_t ib = Op::use_rhs ? x.b_rows.at(p) : 0;
      DType* out = x.c + g.edge(p) * x.out_len;
      for (int64_t e = tile; e < x.out_len; e += walk.tiles) {
        const int64_t ae = Op::use_lhs ? x.a_elem(e) : 0;
        const int64_t be = Op::use_rhs ? x.b_elem(e) : 0;
        out[e] = from_acc<DType>(message<Op>(x, ia, ib, ae, be));
      }
    }
  }
}

template <typename DType, typename IdType>
cudaError_t run_thread_edge(const UgParams& p, cudaStream_t stream) {
  const OpArgs<DType, IdType> x = make_op_args<DType, IdType>(p);
  const int64_t units = ceil_div(p.num_edges, p.grouping);
  // Tiles past the last element would own nothing.
  const LaunchPlan plan = plan_launch(units, std::min<int64_t>(p.tiling, p.out_len), 1);
  if (p.gather_op == UG_GATHER_NONE) {
    if (units == 0) return cudaSuccess;
    UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
      thread_edge_message<Op><<<plan.grid, kBlock, 0, stream>>>(x, plan.walk, p.grouping);
    });
    return cudaGetLastError();
  }
  return UG_GATHER_SWITCH(p.gather_op, DType, Reduce, [&] {
    // Generic, so that a combination run_edge_aggregation refuses is never compiled.
    return run_edge_aggregation<Reduce>(p, x, stream, [&](const auto& sink) {
      UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
        thread_edge_aggregate<Op, Reduce><<<plan.grid, kBlock, 0, stream>>>(x, plan.walk, p.grouping, sink);
      });
    });
  });
}

}  // namespace ugraph
