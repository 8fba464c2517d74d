"""The demo (`make run`) measures fairly: warm-up on both sides first, then on and off
interleaved step by step, at least 10 timed steps per side, medians with their spread, and a
verdict that says when a difference is within noise."""
import pytest
import torch

from dgl_ugraph import __main__ as cli
from dgl_ugraph.dgl import interception

MODELS = 6


def test_verdict_separates_speedups_from_noise():
    on = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.02, 0.98, 1.0]
    assert cli.verdict(on, [t * 1.5 for t in on])[2] == "faster"
    assert cli.verdict(on, [t / 1.5 for t in on])[2] == "slower"
    # Off alternates 20% above and below on: the medians differ, the pairs straddle 1.
    off = [t * (1.2 if i % 2 else 0.8) for i, t in enumerate(on)]
    speedup, (q1, q3), kind = cli.verdict(on, off)
    assert kind == "within noise" and q1 < 1.0 < q3
    assert cli.verdict([1.0] * 10, [2.0] * 10)[0] == pytest.approx(2.0)


def test_summary_line():
    line = cli.summary({"A": (1.5, "faster"), "B": (1.01, "within noise")})
    assert line.startswith("summary: no model is slower") and "within noise: B 1.01x" in line
    assert "1.23x DGL's speed, geomean of 2 models" in line  # sqrt(1.5 * 1.01)
    assert "every model is faster" in cli.summary({"A": (1.5, "faster")})
    assert "some models are slower" in cli.summary({"A": (0.5, "slower")})


def test_load_note_marks_a_busy_or_noisy_machine_only():
    assert cli.load_note(0.2, 2, 0.02) is None
    assert cli.load_note(None, 2, 0.02) is None
    busy = cli.load_note(3.1, 2, 0.02)
    assert busy.startswith("load: other work ran") and "load average 3.1 on 2 cores" in busy and "±2%" in busy
    noisy = cli.load_note(0.2, 2, 0.14)
    assert noisy.startswith("load: paired step times varied by about ±14%")


def test_demo_warms_up_both_sides_then_interleaves(monkeypatch, capsys):
    sides = []
    real = cli._step

    def spy(model, g, x):
        sides.append(interception.is_enabled())
        return real(model, g, x)

    monkeypatch.setattr(cli, "_step", spy)
    cli.demo(["--nodes", "300", "--edges", "2000", "--steps", "10", "--warmup", "2"])
    per_model = 2 * 2 + 2 * 10
    assert len(sides) == MODELS * per_model
    for m in range(MODELS):
        steps = sides[m * per_model:(m + 1) * per_model]
        assert steps[:4] == [True, False, True, False]  # warm-up: every cache of both sides
        timed = steps[4:]
        pairs = [tuple(timed[i:i + 2]) for i in range(0, len(timed), 2)]
        assert pairs == [(True, False) if i % 2 == 0 else (False, True) for i in range(10)]
    out = capsys.readouterr().out
    assert "(auto: torch sees no GPU" in out or not torch.cuda.is_available()
    rows = [line for line in out.splitlines() if line.split(" ")[0] in ("GCN", "GAT", "GIN-sum", "GIN-max",
                                                                         "SAGE-mean", "SAGE-pool")]
    assert len(rows) == MODELS
    for row in rows:
        assert row.count("[") == 3 and "x " in row
        assert row.rstrip().endswith(("faster", "slower", "within noise"))
    assert out.splitlines()[0].startswith("summary: ")  # what the plugin did, first
    assert sum(line.startswith("summary: ") for line in out.splitlines()) == 1


def test_demo_needs_ten_steps():
    with pytest.raises(SystemExit):
        cli.demo(["--steps", "9"])


def test_auto_device_is_the_cpu_when_dgl_cannot_run_on_the_gpu(monkeypatch):
    """torch may see a GPU that DGL (a CPU build) cannot use: auto then picks the CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    import dgl

    def no_cuda(self, device, **kwargs):
        raise RuntimeError("this DGL build has no CUDA")

    monkeypatch.setattr(dgl.DGLGraph, "to", no_cuda)
    device, why = cli.pick_device("auto")
    assert device.type == "cpu" and "DGL does not run there" in why
    assert cli.pick_device("cpu")[0].type == "cpu"
