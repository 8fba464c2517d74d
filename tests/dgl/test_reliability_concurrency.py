"""Concurrency: Python threads sharing one graph (and so one cache entry), 2-process
DistributedDataParallel training over gloo, and a forked worker (as DataLoader workers are) each
give the results they give alone. The multi-process cases run in child interpreters with a time
limit, so a deadlock fails the test instead of hanging the suite.
"""
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch.nn.functional as F

import dgl
import dgl_ugraph
from dgl_ugraph.dgl import cache
from dgl_ugraph.core import _ext

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = [pytest.mark.skipif(_ext.LOAD_ERROR is not None, reason=str(_ext.LOAD_ERROR)),
              pytest.mark.usefixtures("plugin_on")]


def graph(seed=0, nodes=1500, edges=15000):
    gen = torch.Generator().manual_seed(seed)
    g = dgl.graph((torch.randint(0, nodes, (edges,), generator=gen), torch.randint(0, nodes, (edges,), generator=gen)),
                  num_nodes=nodes)
    return dgl.add_self_loop(dgl.remove_self_loop(g))


def make(kind, g, seed):
    """A model and its input, made serially: torch's global RNG is shared between threads."""
    torch.manual_seed(seed)
    x = torch.randn(g.num_nodes(), 16)
    if kind == "gcn":
        model = torch.nn.ModuleList([dgl.nn.GraphConv(16, 32, activation=F.relu), dgl.nn.GraphConv(32, 4)])
    elif kind == "gat":
        model = torch.nn.ModuleList([dgl.nn.GATConv(16, 8, num_heads=4)])
    else:  # max aggregation with its argument-driven backward
        model = torch.nn.ModuleList([dgl.nn.SAGEConv(16, 8, "pool")])
    return model, x


def work(model, x, g):
    """Forward and backward: output, loss and every gradient."""
    h = x
    for layer in model:
        h = layer(g, h)
    h = h.flatten(1)
    loss = h.square().mean()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return [h.detach(), loss.detach()] + list(grads)


JOBS = [("gcn", 1), ("gat", 2), ("sage", 3), ("gcn", 4), ("gat", 5), ("sage", 6)]


@pytest.mark.parametrize("fresh", [True, False], ids=["cold_cache", "warm_cache"])
def test_two_threads_on_one_graph_match_serial(fresh):
    """Both threads run on one graph structure (one gidx, so one dgl_ugraph cache entry and one
    set of decisions). Each thread has its own DGLGraph view of it (g.local_var()), because DGL's
    feature frames are not thread-safe: two threads in local_scope() of one DGLGraph object
    break DGL alone (KeyError on a feature name)."""
    g = graph()
    models = {(k, s): make(k, g, s) for k, s in JOBS}
    if fresh:
        cache.clear()  # both threads race to build the graph entry and make the decisions
    else:
        serial = {job: work(*models[job], g) for job in JOBS}
    results = {}
    barrier = threading.Barrier(2)
    errors = []

    def thread(index):
        try:
            view = g.local_var()
            assert view._graph is g._graph
            barrier.wait()
            for rep in range(2):
                for job in JOBS[index::2] + JOBS[1 - index::2]:
                    results[(index, rep) + job] = work(*models[job], view)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=thread, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    if fresh:
        serial = {job: work(*models[job], g) for job in JOBS}
    assert len(results) == 2 * 2 * len(JOBS)
    for key, got in results.items():
        for a, b in zip(got, serial[key[2:]]):
            assert torch.equal(a, b), key
    assert dgl_ugraph.stats()["intercepted"] > 0


def run_child(args, timeout, env_extra=None):
    """Runs a child interpreter in its own process group; on timeout the whole group (pool
    workers included) is killed and the test fails with what the child printed."""
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="2")
    env.update(env_extra or {})
    env.pop("DGL_UGRAPH", None)
    proc = subprocess.Popen([sys.executable] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the child hung for {timeout} s:\n{out[-2000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


DDP = """
    import os, sys, tempfile
    import torch, torch.distributed as dist, torch.multiprocessing as mp
    import torch.nn.functional as F

    STEPS = 4

    def train(rank, world, port, plugin, out):
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        import dgl, dgl_ugraph
        (dgl_ugraph.enable if plugin else dgl_ugraph.disable)()
        dist.init_process_group("gloo", rank=rank, world_size=world)
        gen = torch.Generator().manual_seed(0)
        n, e = 800, 8000
        g = dgl.add_self_loop(dgl.graph((torch.randint(0, n, (e,), generator=gen),
                                         torch.randint(0, n, (e,), generator=gen)), num_nodes=n))
        x, y = torch.randn(n, 16, generator=gen), torch.randint(0, 4, (n,), generator=gen)
        mine = torch.arange(rank, n, world)  # each rank's share of the training nodes
        torch.manual_seed(0)
        model = torch.nn.ModuleList([dgl.nn.GraphConv(16, 16, activation=F.relu), dgl.nn.GraphConv(16, 4)])
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
        losses = []
        for _ in range(STEPS):
            opt.zero_grad()
            h = ddp.module[1](g, ddp.module[0](g, x))
            # DDP's hooks fire on ddp(...) only: average the gradients by hand, as its reducer does.
            loss = F.cross_entropy(h[mine], y[mine])
            loss.backward()
            for p in ddp.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()
            losses.append(loss.item())
        if rank == 0:
            torch.save({"losses": torch.tensor(losses, dtype=torch.float64),
                        "params": [p.detach().clone() for p in model.parameters()],
                        "intercepted": dgl_ugraph.stats()["intercepted"]}, out)
        dist.destroy_process_group()

    if __name__ == "__main__":
        import socket
        tmp = tempfile.mkdtemp()
        results = {}
        for plugin in (True, False):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            out = os.path.join(tmp, f"{plugin}.pt")
            mp.start_processes(train, args=(2, port, plugin, out), nprocs=2, join=True, start_method="spawn")
            results[plugin] = torch.load(out)
        on, off = results[True], results[False]
        assert on["intercepted"] > 0 and off["intercepted"] == 0, (on["intercepted"], off["intercepted"])
        torch.testing.assert_close(on["losses"], off["losses"], rtol=1e-5, atol=1e-6)
        for a, b in zip(on["params"], off["params"]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        print("DDP OK", on["losses"].tolist())
"""


def test_ddp_gloo_two_processes_plugin_on_equals_off(tmp_path):
    script = tmp_path / "ddp_train.py"
    script.write_text(textwrap.dedent(DDP))
    res = run_child([str(script)], timeout=300, env_extra={"OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-4000:]
    assert "DDP OK" in res.stdout


FORK = """
    import faulthandler, multiprocessing as mp, sys, warnings
    import torch, dgl, dgl_ugraph

    gen = torch.Generator().manual_seed(0)
    G = dgl.graph((torch.randint(0, 3000, (30000,), generator=gen), torch.randint(0, 3000, (30000,), generator=gen)),
                  num_nodes=3000)

    def job(seed):
        gen = torch.Generator().manual_seed(seed)
        small = dgl.graph((torch.randint(0, 300, (3000,), generator=gen), torch.randint(0, 300, (3000,), generator=gen)),
                          num_nodes=300)
        out = []
        for g in (G, small):  # a graph the parent cached, and one made in the worker
            x = torch.randn(g.num_nodes(), 32, generator=gen, requires_grad=True)
            # Compared term by term: a scalar total added to every row would carry torch's own
            # thread-count-dependent rounding into all of them.
            terms = [dgl.ops.copy_u_sum(g, x), dgl.ops.u_dot_v(g, x, x), dgl.ops.copy_u_max(g, x)]
            sum(t.sum() for t in terms).backward()
            out += [t.detach() for t in terms] + [x.grad]
        return out, dgl_ugraph.stats()["intercepted"]

    def worker_init():
        # What torch's DataLoader does in every worker: one intra-op thread. Without it, a child
        # forked after the parent used OpenMP hangs in torch and DGL alone (libgomp's pool does
        # not survive fork); with it, DGL and dgl_ugraph run.
        faulthandler.dump_traceback_later(60, exit=True)
        torch.set_num_threads(1)

    class Subgraphs(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            sg = dgl.node_subgraph(G, torch.arange(i * 400, i * 400 + 900))
            x = torch.arange(sg.num_nodes() * 4, dtype=torch.float32).reshape(-1, 4) % 7
            return dgl.ops.copy_u_mean(sg, x), dgl.ops.u_mul_v(sg, x, x)

    if __name__ == "__main__":
        warnings.simplefilter("error", dgl_ugraph.UGraphFallbackWarning)
        parent = [job(s) for s in range(4)]  # the parent runs the plugin (and OpenMP) first
        with mp.get_context("fork").Pool(2, initializer=worker_init) as pool:
            children = pool.map(job, range(4), chunksize=1)
        for (p, _), (c, n) in zip(parent, children):
            # Workers run one thread, the parent two: dgl_ugraph splits a long row between
            # threads, so float32 sums may round differently (bitwise equal per thread count).
            for a, b in zip(p, c):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)
            assert n > 0  # the forked worker ran on dgl_ugraph too
        loader = torch.utils.data.DataLoader(Subgraphs(), batch_size=None, num_workers=2, multiprocessing_context="fork")
        got = list(loader)
        want = [Subgraphs()[i] for i in range(6)]
        for pair in zip(got, want):
            for a, b in zip(*pair):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        print("FORK OK", sys.argv[1])
"""


@pytest.mark.parametrize("plugin", ["on", "off"])
def test_forked_workers_use_the_plugin(plugin):
    """The same program with the plugin on and with DGL_UGRAPH=0 semantics (disabled): both finish."""
    code = textwrap.dedent(FORK)
    if plugin == "off":
        code = code.replace("import torch, dgl, dgl_ugraph\n", "import torch, dgl, dgl_ugraph\ndgl_ugraph.disable()\n", 1)
        code = code.replace("assert n > 0", "assert n == 0")
    res = run_child(["-c", code, plugin], timeout=180)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "FORK OK" in res.stdout
