// warp_edge: lanes of one warp share runs of positions, combining partial rows atomically. Every
// edge op but dot runs as team::launch_edge (team.cuh): teams of 1-32 lanes with 16-byte
// accesses over `group` positions each, balanced however skewed the rows are; dot messages run
// as team::launch_dot_message. An aggregated dot runs here, where the lanes split its products:
// a worker is one warp; a work unit is (about `group` consecutive positions in CSC order,
// row-aligned as in edge_aggregate.cuh, feature tile j of `tiles`), with the lanes and chunks of warp_vertex (LaneLayout in
// common.cuh). Aggregation keeps one accumulator per lane while the destination stays the same
// and flushes it through edge_aggregate.cuh when the row changes or the group ends. The indices
// of 32 positions are loaded at once, one per lane, and broadcast by shuffles. Lanes past the
// last element compute element 0 and discard it, as in warp_vertex.
#pragma once

#include <algorithm>

#include "common.cuh"
#include "edge_aggregate.cuh"
#include "functor.cuh"
#include "launch.h"
#include "static_switch.h"
#include "team.cuh"

namespace ugraph {

template <typename Op, typename Reduce, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    warp_edge_aggregate(const OpArgs<DType, IdType> x, const TileWalk walk, const int group,
                        const LaneLayout lanes, const EdgeSink<Reduce, DType> sink) {
  using Acc = acc_t<DType>;
  const Topology<IdType>& g = x.graph;
  const int lane = lane_id();
  const int width = lanes.width();
  const int share = lane & (width - 1);       // this lane's share of a dot's products
  const int slot = lane >> lanes.width_log2;  // this lane's element within a chunk
  int64_t unit;
  uint32_t tile;
  for (walk.first(global_warp(), unit, tile); unit < walk.units; walk.next(unit, tile)) {
    const int64_t p_begin = unit_start(g, unit, group);
    const int64_t p_end = unit_start(g, unit + 1, group);
    if (p_begin >= p_end) continue;  // a unit past the last row that starts in it
    // A run that touches an end of the unit covers its whole row only if the position just
    // outside that end belongs to another row (-1: there is none).
    const int64_t row_before = p_begin > 0 ? g.dst(p_begin - 1) : -1;
    const int64_t row_after = p_end < g.num_edges ? g.dst(p_end) : -1;
    for (int64_t chunk = tile; chunk < lanes.chunks; chunk += walk.tiles) {
      const int64_t e = chunk * lanes.per_chunk() + slot;
      const bool active = e < x.out_len;
      const bool flusher = active && share == 0;
      const int64_t ae = Op::use_lhs ? x.a_elem(active ? e : 0) : 0;
      const int64_t be = Op::use_rhs ? x.b_elem(active ? e : 0) : 0;
      int64_t run_row = -1, run_begin = p_begin, win = -1;
      Acc acc = Reduce::zero();
      for (int64_t base = p_begin; base < p_end; base += kWarp) {
        const int n = static_cast<int>(min64(kWarp, p_end - base));
        IdType lane_v = 0, lane_a = 0, lane_b = 0;
        if (lane < n) {
          const int64_t v = g.dst(base + lane);
          lane_v = static_cast<IdType>(v);
          if constexpr (Op::use_lhs) lane_a = static_cast<IdType>(x.a_rows.at(base + lane, v));
          if constexpr (Op::use_rhs) lane_b = static_cast<IdType>(x.b_rows.at(base + lane, v));
        }
        for (int i = 0; i < n; ++i) {
          // v, and so every branch on it, is the same on all lanes.
          const int64_t v = shfl_index(lane_v, i);
          if (v != run_row) {
            if (run_row >= 0 && flusher) {
              sink.flush(x, run_row, e, acc, win, run_begin > p_begin || row_before != run_row);
            }
            run_row = v;
            run_begin = base + i;
            acc = Reduce::zero();
            win = -1;
          }
          const int64_t ia = Op::use_lhs ? shfl_index(lane_a, i) : 0;
          const int64_t ib = Op::use_rhs ? shfl_index(lane_b, i) : 0;
          Acc val = message<Op>(x, ia, ib, ae, be, share, width);
          if constexpr (Op::reduce_last_dim) val = lane_group_sum(val, width);
          if (Reduce::Call(acc, val)) win = base + i;
        }
      }
      if (flusher) {
        sink.flush(x, run_row, e, acc, win,
                   (run_begin > p_begin || row_before != run_row) && row_after != run_row);
      }
    }
  }
}

template <typename DType, typename IdType>
cudaError_t run_warp_edge(const UgParams& p, cudaStream_t stream) {
  const OpArgs<DType, IdType> x = make_op_args<DType, IdType>(p);
  if (p.edge_op != UG_DOT) return team::launch_edge(p, x, stream);
  if (p.gather_op == UG_GATHER_NONE) return team::launch_dot_message<false>(p, x, stream);
  using Op = binary::Dot<DType>;
  const LaneLayout lanes = lane_layout(p);
  const int64_t units = ceil_div(p.num_edges, p.grouping);
  // Tiles past the last chunk would own nothing.
  const LaunchPlan plan = plan_launch(units, std::min<int64_t>(p.tiling, lanes.chunks), kWarp);
  return UG_GATHER_SWITCH(p.gather_op, DType, Reduce, [&] {
    // Generic, so that a combination run_edge_aggregation refuses is never compiled.
    return run_edge_aggregation<Reduce>(p, x, stream, [&](const auto& sink) {
      warp_edge_aggregate<Op, Reduce><<<plan.grid, kBlock, 0, stream>>>(x, plan.walk, p.grouping, lanes, sink);
    });
  });
}

}  // namespace ugraph
