// Probe (session 36; see edge_order_sum.h): an aggregation over the edges in edge-id order.
// Where the edge ids are scattered over the CSC, the team strategies gather an edge operand
// through eid: one 32-byte sector or more per position from DRAM once the operand outgrows L2
// (GAT's (E, 8, 1) attention on 4.9M edges: 156 MB). Walking the edges in id order reads it as a
// stream, and pays instead one vector atomic per lane and edge into C.
#include "edge_order_sum.h"

#include <string>

#include "common.cuh"
#include "edge_aggregate.cuh"
#include "entry.h"
#include "functor.cuh"
#include "static_switch.h"
#include "team.cuh"

namespace ugraph {
namespace team {

// A team of 2^lanes_log2 lanes walks `group` consecutive edge ids a unit; each lane adds its
// kVec elements of every edge's message into the edge's destination row (for a mean, scaled by
// the reciprocal of the row's in-degree first).
template <typename Op, int kVec, int kGatherB, typename DType, typename IdType>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    edge_order_sum(const OpArgs<DType, IdType> x, const TileWalk walk, const int group, const int lanes_log2,
                   const int64_t slabs) {
  using Pos = pos_t<IdType>;
  using Acc = acc_t<DType>;
  const EdgeSink<reduce::Sum<DType>, DType> sink{x.c};
  const Topology<IdType>& g = x.graph;
  const int64_t slab_elems = int64_t(kVec) << lanes_log2;
  const int64_t lane_first = int64_t(team_lane(lanes_log2)) * kVec;
  int64_t unit;
  uint32_t tile;
  for (walk.first(team_index(lanes_log2), unit, tile); walk.more(unit, tile); walk.next(unit, tile)) {
    const auto p_begin = static_cast<Pos>(unit * group);
    const auto p_end = static_cast<Pos>(min64(unit * group + group, g.num_edges));
    for (int64_t slab = tile; slab < slabs; slab += walk.tiles) {
      const int64_t first = slab * slab_elems + lane_first;
      const bool active = first < x.out_len;
      const LaneOffsets<kVec, kGatherB, DType> off(x, active ? first : 0);
      for (Pos p = p_begin; p < p_end; p += kInFlight) {
        Pos dst[kInFlight];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) dst[u] = g.dst_pos(min(p + u, p_end - 1));
        Acc m[kInFlight][kVec];
        Pos ia[kInFlight], ib[kInFlight];
        messages<Op, false>(x, off, p, p_end - 1, Pos(0), m, ia, ib);
        if (!active) continue;
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          if (p + u >= p_end) break;
          if (x.mean) {
            const Pos degree = g.end_pos(dst[u]) - g.begin_pos(dst[u]);
            const Acc inverse = Acc(1) / static_cast<Acc>(degree > 1 ? degree : 1);
#pragma unroll
            for (int k = 0; k < kVec; ++k) m[u][k] *= inverse;
          }
          sink.template flush_partial_sum<kVec>(int64_t(dst[u]) * x.out_len + first, m[u]);
        }
      }
    }
  }
}

template <typename DType, typename IdType>
cudaError_t launch_edge_order_sum(const UgParams& p, cudaStream_t stream) {
  const OpArgs<DType, IdType> x = make_op_args<DType, IdType>(p);
  UG_CUDA_TRY(cudaMemsetAsync(p.c, 0, size_t(p.num_dst) * size_t(p.out_len) * sizeof(DType), stream));
  const int64_t units = ceil_div(p.num_edges, p.grouping);
  if (units == 0) return cudaSuccess;
  return with_vector_width<DType>(p, [&](auto vec, auto gather_b) -> cudaError_t {
    constexpr int kVec = decltype(vec)::value;
    constexpr int kGatherB = decltype(gather_b)::value;
    const Layout t = layout(p.out_len, kVec, 1);
    const LaunchPlan plan = plan_launch(units, std::min<int64_t>(p.tiling, t.slabs), 1 << t.lanes_log2);
    UG_EDGE_OP_SWITCH(p.edge_op, DType, Op, [&] {
      if constexpr (kDispatched<Op, kGatherB>) {
        edge_order_sum<Op, kVec, kGatherB, DType, IdType>
            <<<plan.grid, kBlock, 0, stream>>>(x, plan.walk, p.grouping, t.lanes_log2, t.slabs);
      }
    });
    return cudaGetLastError();
  });
}

}  // namespace team
}  // namespace ugraph

extern "C" int ug_cuda_run_edge_order_sum(const UgParams* p, void* stream) {
  using namespace ugraph;
  Verdict v = check_call(p);
  if (v.status == UG_OK && !(p->gather_op == UG_SUM || p->gather_op == UG_MEAN)) {
    v = {UG_ERR_UNSUPPORTED, "the edge-order sum runs gather sum and mean only"};
  }
  if (v.status == UG_OK && !(p->dtype == UG_F32 || p->dtype == UG_F64)) {
    v = {UG_ERR_UNSUPPORTED, "the edge-order sum runs float32 and float64 only (no staged half sums)"};
  }
  if (v.status == UG_OK && (p->edge_op == UG_DOT || p->eid != nullptr)) {
    v = {UG_ERR_UNSUPPORTED, "the edge-order sum takes no dot and no eid (edges in id order)"};
  }
  if (v.status == UG_OK && p->num_dst * p->out_len > 0) {
    const cudaError_t err = p->dtype == UG_F32
        ? (p->index_bits == 32 ? team::launch_edge_order_sum<float, int32_t>(*p, static_cast<cudaStream_t>(stream))
                               : team::launch_edge_order_sum<float, int64_t>(*p, static_cast<cudaStream_t>(stream)))
        : (p->index_bits == 32 ? team::launch_edge_order_sum<double, int32_t>(*p, static_cast<cudaStream_t>(stream))
                               : team::launch_edge_order_sum<double, int64_t>(*p, static_cast<cudaStream_t>(stream)));
    if (err != cudaSuccess) v = {UG_ERR_CUDA, std::string("CUDA error in the edge-order sum: ") + cudaGetErrorString(err)};
  }
  if (v.status != UG_OK) set_last_error(v.why);
  return v.status;
}
