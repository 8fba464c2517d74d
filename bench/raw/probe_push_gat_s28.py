"""Would a push aggregation (edges walked in edge-id order, each message added atomically into its
destination row) beat the pull kernels on GAT's (N, H, D) x (E, H, 1) aggregation, whose cost over
copy_u-sum is the attention read by edge id? The stand-ins' edge ids are in source order, so a
push walk reads the attention, the source ids and the destination ids contiguously and the source
rows in runs; what it pays instead is E x F float atomics (16-byte vector atomics, sm_90) into C,
zeroed first (in the time). A probe kernel (inline, float32, int32 ids), not a strategy:
`push` beside our kernels on the selector's choice (policy.plan) for GAT and copy_u-sum, on the
same graph, checked against ours (allclose), CUDA events over 20 back-to-back calls, the four
alternating over 7 rounds, medians per call.
    PYTHONPATH=. python bench/raw/probe_push_gat_s28.py OUT.csv"""
import sys

import torch
from torch.utils.cpp_extension import load_inline

from dgl_ugraph.core.abstraction import OpInfo
from dgl_ugraph.core.graph import UGraph
from dgl_ugraph.selection import policy
from dgl_ugraph.tuning import graph_suite as gs
from dgl_ugraph.tuning.shards import write_rows
from probe_gat_csc_s26 import alternating_medians  # bench/raw, the script's own folder

GRAPHS = ("amazon0505", "amazon0601", "com-amazon", "soc-BlogCatalog", "artist", "DD", "ppi", "OVCAR-8H")
SHAPES = ((4, 4), (4, 16), (1, 16))  # (H, D)

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

// A team of F/4 lanes per edge (a lane per float4 of the row), kUnroll consecutive edges a team
// in flight; the warp's teams take consecutive runs, so the id and attention loads coalesce.
template <int kUnroll>
__global__ void push_kernel(const int* __restrict__ src, const int* __restrict__ dst,
                            const float4* __restrict__ x, const float* __restrict__ att,
                            float* __restrict__ out, long long num_edges, int f4, int heads, int lanes_per_head) {
  const int team_size = f4;
  const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const int lane = tid % team_size;
  const long long team = tid / team_size;
  const long long teams = (gridDim.x * (long long)blockDim.x) / team_size;
  if (team >= teams) return;
  const int head = lane / lanes_per_head;
  for (long long e0 = team * kUnroll; e0 < num_edges; e0 += teams * kUnroll) {
    int s[kUnroll], d[kUnroll];
    float w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long e = e0 + u;
      s[u] = e < num_edges ? __ldg(src + e) : -1;
      d[u] = e < num_edges ? __ldg(dst + e) : 0;
      w[u] = (att != nullptr && e < num_edges) ? __ldg(att + e * heads + head) : 1.f;
    }
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (s[u] >= 0) v[u] = __ldg(x + (long long)s[u] * f4 + lane);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (s[u] >= 0)
        atomicAdd(reinterpret_cast<float4*>(out) + (long long)d[u] * f4 + lane,
                  make_float4(v[u].x * w[u], v[u].y * w[u], v[u].z * w[u], v[u].w * w[u]));
  }
}

torch::Tensor push(torch::Tensor src, torch::Tensor dst, torch::Tensor x, c10::optional<torch::Tensor> att,
                   int64_t num_dst, int64_t heads, int64_t unroll, int64_t blocks_per_sm) {
  const int64_t f = x.numel() / x.size(0);
  auto out = torch::zeros({num_dst, f}, x.options());
  const int f4 = f / 4;
  const int lanes_per_head = f4 / heads;
  auto stream = at::cuda::getCurrentCUDAStream();
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.device().index());
  const int threads = 256;
  const long long needed = (src.numel() + unroll - 1) / unroll * f4;
  long long blocks = std::min<long long>((needed + threads - 1) / threads, (long long)sms * blocks_per_sm);
  blocks = std::max<long long>(blocks, 1);
  const float* a = att.has_value() ? att->data_ptr<float>() : nullptr;
  auto launch = [&](auto kernel) {
    kernel<<<blocks, threads, 0, stream>>>(src.data_ptr<int>(), dst.data_ptr<int>(),
        reinterpret_cast<const float4*>(x.data_ptr<float>()), a, out.data_ptr<float>(), src.numel(), f4, heads,
        lanes_per_head);
  };
  if (unroll == 1) launch(push_kernel<1>); else if (unroll == 2) launch(push_kernel<2>); else launch(push_kernel<4>);
  return out;
}
"""
CPP_SRC = ("torch::Tensor push(torch::Tensor src, torch::Tensor dst, torch::Tensor x, c10::optional<torch::Tensor> att,"
           " int64_t num_dst, int64_t heads, int64_t unroll, int64_t blocks_per_sm);")


def main(out):
    ext = load_inline("probe_push", CPP_SRC, cuda_sources=CUDA_SRC, functions=["push"],
                      extra_cuda_cflags=["-O3", "-arch=sm_90"], verbose=False)
    specs = {s.name: s for s in gs.PAPER_STANDINS}
    rows = []
    for name in GRAPHS:
        src, dst, n = gs.make(specs[name])
        src32, dst32 = src.cuda().int(), dst.cuda().int()
        g = UGraph.from_coo(src32, dst32, n, n, torch.int32)
        e = g.num_edges
        for heads, d in SHAPES:
            f = heads * d
            h = torch.randn(n, heads, d, device="cuda")
            att = torch.rand(e, heads, 1, device="cuda")
            flat = h.reshape(n, f)
            gat = policy.plan(g, OpInfo("mul", "sum", h, "src", att, "edge", "dst"))
            copy = policy.plan(g, OpInfo("copy_lhs", "sum", flat, "src", None, "null", "dst"))
            calls = {"ugraph_gat": lambda: gat.run(h, att), "ugraph_copy_u_sum": lambda: copy.run(flat, None)}
            want = gat.run(h, att)[0].reshape(n, f).double()
            for unroll, bps in ((1, 8), (2, 8), (4, 8), (2, 16)):
                got = ext.push(src32, dst32, flat, att.reshape(e, heads), n, heads, unroll, bps).double()
                err = ((got - want).abs().max() / want.abs().max()).item()
                assert err < 1e-5, (name, heads, d, unroll, err)
                calls[f"push_gat_u{unroll}_b{bps}"] = (
                    lambda unroll=unroll, bps=bps: ext.push(src32, dst32, flat, att.reshape(e, heads), n, heads,
                                                            unroll, bps))
            calls["push_copy_u_sum_u2_b8"] = lambda: ext.push(src32, dst32, flat, None, n, 1, 2, 8)
            ms = alternating_medians(calls)
            best = min((k for k in ms if k.startswith("push_gat")), key=ms.get)
            print(f"{name} E={e} H={heads} D={d}: ours gat {ms['ugraph_gat'] * 1e3:.1f} us, copy_u_sum "
                  f"{ms['ugraph_copy_u_sum'] * 1e3:.1f}; push gat {best} {ms[best] * 1e3:.1f} "
                  f"(ours/push {ms['ugraph_gat'] / ms[best]:.2f}x), push copy {ms['push_copy_u_sum_u2_b8'] * 1e3:.1f}",
                  flush=True)
            rows += [{"device": torch.cuda.get_device_name(), "graph": name, "V": n, "E": e, "heads": heads, "D": d,
                      "impl": k, "ms": round(t, 5)} for k, t in ms.items()]
        write_rows(out, rows)


if __name__ == "__main__":
    main(sys.argv[1])
