"""Sampled training pipelines on the plugin: GraphBolt's MiniBatch blocks, and DGL's DataLoader
under DistributedDataParallel (two processes over gloo). Each trains with the plugin on and off
from the same state on the same blocks; float64 parameters agree to 1e-12 and every message
passing call of the plugin-on run runs on dgl_ugraph's kernels."""
from __future__ import annotations

import copy
import os
import socket
import time

import pytest
import torch
import torch.nn.functional as F

dgl = pytest.importorskip("dgl")
import dgl.nn as dglnn  # noqa: E402

import dgl_ugraph  # noqa: E402

pytestmark = pytest.mark.usefixtures("plugin_on")

FEAT, HIDDEN, CLASSES = 8, 16, 3
STEPS_TOL = 1e-12


class Sage(torch.nn.Module):
    """DGL's GraphSAGE example, two layers on a block each: a mean and a GCN aggregator."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([dglnn.SAGEConv(FEAT, HIDDEN, "mean"),
                                           dglnn.SAGEConv(HIDDEN, CLASSES, "gcn")])

    def forward(self, blocks, x):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            x = layer(block, x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x


def _graph(seed=0, n=300, e=2400):
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    g = dgl.graph((src, dst), num_nodes=n)
    feat = torch.randn(n, FEAT, dtype=torch.float64, generator=gen)
    labels = torch.randint(0, CLASSES, (n,), generator=gen)
    return g, feat, labels


def _step(model, opt, blocks, x, y):
    opt.zero_grad()
    F.cross_entropy(model(blocks, x), y).backward()
    opt.step()


def _params(model):
    model = getattr(model, "module", model)  # DistributedDataParallel's wrapped model
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _train(model, batches):
    """SGD over the batches, one step each; the parameters after."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for blocks, x, y in batches:
        _step(model, opt, blocks, x, y)
    return _params(model)


def _record(model):
    """The parameters after a plugin-on or -off run, and where its calls ran."""
    stats = dgl_ugraph.stats()
    return {"params": _params(model), "calls": stats["calls"], "fallback": stats["fallback"],
            "module_dgl": sum(m["dgl"] for m in stats["modules"].values())}


def _assert_same(ours, theirs):
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], rtol=STEPS_TOL, atol=STEPS_TOL, msg=name)


def _assert_all_on_plugin(record):
    assert record["calls"] > 0 and record["fallback"] == 0 and record["module_dgl"] == 0, record


def _assert_on_equals_off(on, off):
    _assert_all_on_plugin(on)
    assert off["calls"] == 0, off
    _assert_same(on["params"], off["params"])


def test_graphbolt_minibatches_train_on_the_plugin_as_on_dgl():
    gb = pytest.importorskip("dgl.graphbolt")
    g, feat, labels = _graph()
    indptr, indices, _ = g.adj_tensors("csc")
    graph = gb.fused_csc_sampling_graph(indptr, indices)
    store = gb.BasicFeatureStore({("node", None, "feat"): gb.TorchBasedFeature(feat)})
    seeds = torch.arange(0, g.num_nodes(), 3)
    items = gb.ItemSet((seeds, labels[seeds]), names=("seed_nodes", "labels"))
    pipe = gb.ItemSampler(items, batch_size=20, shuffle=True).sample_neighbor(graph, [5, 5])
    pipe = pipe.fetch_feature(store, node_feature_keys=["feat"])

    torch.manual_seed(0)
    model = Sage().double()
    state = copy.deepcopy(model.state_dict())
    # The pipeline runs with the plugin on, training as it goes; its blocks are kept for the
    # plugin-off run (GraphBolt's sampling has no seed that repeats a run).
    dgl_ugraph.reset_stats()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    batches = []
    for mb in gb.DataLoader(pipe, num_workers=0):
        blocks, x, y = mb.blocks, mb.node_features["feat"], mb.labels
        assert all(isinstance(b, dgl.DGLGraph) and b.is_block for b in blocks)
        _step(model, opt, blocks, x, y)
        batches.append((blocks, x, y))
    ours = _record(model)
    _assert_all_on_plugin(ours)
    assert len(batches) == -(-len(seeds) // 20)

    model.load_state_dict(state)
    with dgl_ugraph.disabled():
        theirs = _train(model, batches)
    _assert_same(ours["params"], theirs)


def _free_ports(n=1):
    """n distinct free ports on loopback: all held open together while picked, as the OS may hand
    a just-released port out again (two services of one test on one port hang both)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ddp_worker(rank, world, port, plugin, out):
    """One DDP rank: DGL's DataLoader with use_ddp over a full-neighbor sampler (blocks that
    repeat exactly, so that the plugin-on and -off runs meet the same batches), gloo, float64."""
    import numpy as np
    import torch.distributed as dist

    torch.set_num_threads(1)
    if plugin:
        dgl_ugraph.enable()
    else:
        dgl_ugraph.disable()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        g, feat, labels = _graph(seed=1)
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(Sage().double())
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        sampler = dgl.dataloading.MultiLayerFullNeighborSampler(2)
        seeds = torch.arange(0, g.num_nodes(), 2)
        loader = dgl.dataloading.DataLoader(g, seeds, sampler, batch_size=25, shuffle=True, use_ddp=True,
                                            ddp_seed=5, drop_last=False)
        np.random.seed(rank)  # DGL's DDP shuffle draws from numpy's global generator
        dgl_ugraph.reset_stats()
        for _ in range(2):  # two epochs, each reshuffled
            for _, dst, blocks in loader:
                _step(model, opt, blocks, feat[blocks[0].srcdata[dgl.NID]], labels[dst])
        if rank == 0:
            torch.save(_record(model), out)
    finally:
        dist.destroy_process_group()


def test_ddp_training_with_dgl_s_dataloader_matches_plugin_off(tmp_path):
    mp = pytest.importorskip("torch.multiprocessing")
    runs = {}
    for plugin in (True, False):
        out = str(tmp_path / f"ddp_{plugin}.pt")
        procs = mp.spawn(_ddp_worker, args=(2, _free_ports()[0], plugin, out), nprocs=2, join=False)
        deadline = time.monotonic() + 180  # a hung gloo group fails the test, not the whole run
        while not procs.join(5):
            if time.monotonic() > deadline:
                for p in procs.processes:
                    p.kill()
                pytest.fail("the DDP processes did not end within 180 s")
        runs[plugin] = torch.load(out)
    on = runs[True]
    _assert_on_equals_off(on, runs[False])
    # The steps moved the parameters: equality is not the initial state's.
    torch.manual_seed(0)
    init = dict(Sage().double().named_parameters())
    assert any(not torch.equal(init[n].detach(), on["params"][n]) for n in init)



def _distdgl_standalone(part_dir, out):
    """DistDGL in standalone mode (one process, its partition loaded locally): DistGraph and
    DistNodeDataLoader train with the plugin on; the same blocks then train with it off."""
    dgl.distributed.initialize(None)
    try:
        dg = dgl.distributed.DistGraph("toy", part_config=os.path.join(part_dir, "toy.json"))
        sampler = dgl.dataloading.NeighborSampler([5, 5])
        seeds = torch.arange(0, dg.num_nodes(), 3)
        loader = dgl.dataloading.DistNodeDataLoader(dg, seeds, sampler, batch_size=20, shuffle=True)
        torch.manual_seed(0)
        model = Sage().double()
        state = copy.deepcopy(model.state_dict())
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        dgl_ugraph.enable()
        dgl_ugraph.reset_stats()
        batches = []
        for input_nodes, dst, blocks in loader:
            x, y = dg.ndata["feat"][input_nodes], dg.ndata["label"][dst]
            _step(model, opt, blocks, x, y)
            batches.append((blocks, x, y))
        ours = _record(model)
        model.load_state_dict(state)
        with dgl_ugraph.disabled():
            theirs = _train(model, batches)
        torch.save({"ours": ours, "theirs": theirs, "batches": len(batches)}, out)
    finally:
        dgl.distributed.exit_client()


def _partitioned(folder):
    """The test graph as DistDGL's one partition in `folder`; its node count. DistDGL's processes
    are spawned: initialize() sets process-wide state once."""
    pytest.importorskip("dgl.distributed")
    g, feat, labels = _graph(seed=2)
    g.ndata["feat"], g.ndata["label"] = feat, labels
    dgl.distributed.partition_graph(g, "toy", 1, str(folder))
    return g.num_nodes()


def test_distdgl_standalone_training_matches_plugin_off(tmp_path):
    nodes = _partitioned(tmp_path)
    out = str(tmp_path / "standalone.pt")
    proc = torch.multiprocessing.get_context("spawn").Process(target=_distdgl_standalone, args=(str(tmp_path), out))
    proc.start()
    proc.join(300)
    assert proc.exitcode == 0
    run = torch.load(out)
    assert run["batches"] == -(-len(range(0, nodes, 3)) // 20)
    _assert_all_on_plugin(run["ours"])
    _assert_same(run["ours"]["params"], run["theirs"])


def _cluster_ports():
    """A port for DistDGL's servers (server i listens on it + i: two ports) and one for the
    trainers' gloo group, all distinct and free when picked."""
    while True:
        socks = [socket.socket() for _ in range(3)]
        try:
            socks[0].bind(("127.0.0.1", 0))
            server_port = socks[0].getsockname()[1]
            socks[1].bind(("127.0.0.1", server_port + 1))
            socks[2].bind(("127.0.0.1", 0))
            return server_port, socks[2].getsockname()[1]
        except OSError:  # server_port + 1 is taken: pick again
            continue
        finally:
            for s in socks:
                s.close()


def _distdgl_server(server_id, ip_config, part_config):
    """One of the two servers of a one-machine DistDGL cluster (server 1 backs server 0 up)."""
    os.environ["DGL_DIST_MODE"] = "distributed"
    dgl.distributed.DistGraphServer(server_id, ip_config, 2, 2, part_config, graph_format=["csc", "coo"]).start()


def _distdgl_trainer(rank, ip_config, part_config, port, plugin, out):
    """One of two trainers: DistGraph over the servers, DistNodeDataLoader over its split of the
    training nodes with full neighborhoods (blocks that repeat exactly between the plugin-on and
    -off runs), DistributedDataParallel over gloo, float64."""
    import torch.distributed as dist

    os.environ.update(DGL_ROLE="client", DGL_DIST_MODE="distributed", DGL_NUM_SERVER="2", DGL_NUM_SAMPLER="0")
    torch.set_num_threads(1)
    (dgl_ugraph.enable if plugin else dgl_ugraph.disable)()
    dgl.distributed.initialize(ip_config)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        dg = dgl.distributed.DistGraph("toy", part_config=part_config)
        mask = torch.zeros(dg.num_nodes(), dtype=torch.bool)
        mask[::3] = True
        seeds = dgl.distributed.node_split(mask, dg.get_partition_book())
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(Sage().double())
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        loader = dgl.dataloading.DistNodeDataLoader(dg, seeds, dgl.dataloading.MultiLayerFullNeighborSampler(2),
                                                    batch_size=10, shuffle=False)
        dgl_ugraph.reset_stats()
        for input_nodes, dst, blocks in loader:
            _step(model, opt, blocks, dg.ndata["feat"][input_nodes], dg.ndata["label"][dst])
        if rank == 0:
            torch.save(_record(model), out)
    finally:
        dist.destroy_process_group()
        dgl.distributed.exit_client()


def _run_cluster(ctx, folder, part_config, plugin):
    """One run of the cluster: the exit codes of its two servers and two trainers, in that order.
    Servers start a second apart, then the trainers, as DGL's own tests do (DistDGL's connection
    set-up races otherwise); a process still running after 120 s is killed."""
    ip_config, out = str(folder / "ip_config.txt"), str(folder / f"cluster_{plugin}.pt")
    server_port, port = _cluster_ports()
    with open(ip_config, "w") as f:
        f.write(f"127.0.0.1 {server_port}\n")
    servers = [ctx.Process(target=_distdgl_server, args=(i, ip_config, part_config)) for i in range(2)]
    trainers = [ctx.Process(target=_distdgl_trainer, args=(r, ip_config, part_config, port, plugin, out))
                for r in range(2)]
    try:
        for p in servers + trainers:
            p.start()
            time.sleep(1)
        for p in trainers + servers:
            p.join(120)
        return [p.exitcode for p in servers + trainers], out
    finally:
        for p in servers + trainers:
            if p.is_alive():
                p.kill()


def test_distdgl_cluster_on_loopback_matches_plugin_off(tmp_path):
    """Two servers and two trainers on one machine, as DGL's launch script starts them. A run
    whose processes do not all end (DistDGL's RPC, not the plugin: a crash exits non-zero) gets
    one more try on fresh ports."""
    _partitioned(tmp_path)
    part_config = str(tmp_path / "toy.json")
    ctx = torch.multiprocessing.get_context("spawn")
    runs = {}
    for plugin in (True, False):
        codes, out = _run_cluster(ctx, tmp_path, part_config, plugin)
        if None in codes:
            codes, out = _run_cluster(ctx, tmp_path, part_config, plugin)
        assert codes == [0] * 4, codes
        runs[plugin] = torch.load(out)
    _assert_on_equals_off(runs[True], runs[False])
