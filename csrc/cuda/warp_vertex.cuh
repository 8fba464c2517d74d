// warp_vertex: lanes of one warp share destination rows, with no atomics. Every edge op but dot
// runs as team::launch_vertex (team.cuh): teams of 1-32 lanes with 16-byte accesses, sized to
// the output row; dot messages run as team::launch_dot_message. An aggregated dot runs here,
// where the lanes split its products:
// a worker is one warp; a work unit is (`group` consecutive destination rows,
// feature tile j of `tiles`). The lanes span one chunk of output elements at a time
// (LaneLayout in common.cuh: 32 elements, or fewer with a dot's products split over lanes) and
// tile j owns chunks j, j + tiles, .... Each row's edges are walked in order, so there are no
// atomics. The operand rows of 32 positions are loaded at once, one per lane, and broadcast by
// shuffles, so the feature loads of successive edges do not wait on one index load each.
// Lanes past the last element (`active` false) compute element 0 and discard it: every lane
// then loads unconditionally, which lets the compiler batch the loads of successive edges
// instead of fencing each edge in a divergent branch.
#pragma once

#include <algorithm>

#include "common.cuh"
#include "functor.cuh"
#include "launch.h"
#include "static_switch.h"
#include "team.cuh"

namespace ugraph {

template <typename Op, typename Reduce, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    warp_vertex_aggregate(const OpArgs<DType, IdType> x, const TileWalk walk, const int group,
                          const LaneLayout lanes) {
  using Acc = acc_t<DType>;
  const Topology<IdType>& g = x.graph;
  const int lane = lane_id();
  const int width = lanes.width();
  const int share = lane & (width - 1);       // this lane's share of a dot's products
  const int slot = lane >> lanes.width_log2;  // this lane's element within a chunk
  int64_t unit;
  uint32_t tile;
  for (walk.first(global_warp(), unit, tile); unit < walk.units; walk.next(unit, tile)) {
    const int64_t v_begin = unit * group;
    const int64_t v_end = min64(v_begin + group, g.num_dst);
    for (int64_t v = v_begin; v < v_end; ++v) {
      const int64_t p_begin = g.begin(v), p_end = g.end(v);
      for (int64_t chunk = tile; chunk < lanes.chunks; chunk += walk.tiles) {
        const int64_t e = chunk * lanes.per_chunk() + slot;
        const bool active = e < x.out_len;
        const int64_t ae = Op::use_lhs ? x.a_elem(active ? e : 0) : 0;
        const int64_t be = Op::use_rhs ? x.b_elem(active ? e : 0) : 0;
        Acc acc = Reduce::zero();
        int64_t win_a = 0, win_b = 0;
        for (int64_t base = p_begin; base < p_end; base += kWarp) {
          const int n = static_cast<int>(min64(kWarp, p_end - base));
          IdType lane_a = 0, lane_b = 0;
          if (lane < n) {
            if constexpr (Op::use_lhs) lane_a = static_cast<IdType>(x.a_rows.at(base + lane, v));
            if constexpr (Op::use_rhs) lane_b = static_cast<IdType>(x.b_rows.at(base + lane, v));
          }
          for (int i = 0; i < n; ++i) {
            const int64_t ia = Op::use_lhs ? shfl_index(lane_a, i) : 0;
            const int64_t ib = Op::use_rhs ? shfl_index(lane_b, i) : 0;
            Acc val = message<Op>(x, ia, ib, ae, be, share, width);
            if constexpr (Op::reduce_last_dim) val = lane_group_sum(val, width);
            if (Reduce::Call(acc, val)) {
              win_a = ia;
              win_b = ib;
            }
          }
        }
        if (active && share == 0) x.store(v * x.out_len + e, x.mean_of(acc, p_end - p_begin), win_a, win_b);
      }
    }
  }
}

template <typename DType, typename IdType>
cudaError_t run_warp_vertex(const UgParams& p, cudaStream_t stream) {
  const OpArgs<DType, IdType> x = make_op_args<DType, IdType>(p);
  if (p.edge_op != UG_DOT) return team::launch_vertex(p, x, stream);
  if (p.gather_op == UG_GATHER_NONE) return team::launch_dot_message<true>(p, x, stream);
  using Op = binary::Dot<DType>;
  const LaneLayout lanes = lane_layout(p);
  const int64_t units = ceil_div(p.num_dst, p.grouping);
  // Tiles past the last chunk would own nothing.
  const LaunchPlan plan = plan_launch(units, std::min<int64_t>(p.tiling, lanes.chunks), kWarp);
  if (units == 0) return cudaSuccess;
  UG_GATHER_SWITCH(p.gather_op, DType, Reduce, [&] {
    warp_vertex_aggregate<Op, Reduce><<<plan.grid, kBlock, 0, stream>>>(x, plan.walk, p.grouping, lanes);
  });
  return cudaGetLastError();
}

}  // namespace ugraph
