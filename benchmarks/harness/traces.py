"""Op-sequence traces, recorded on CPU with DGL and replayed anywhere without it (replay.py).

A trace file holds one model's traces, one per graph, as gzip'd JSON (<model>.json.gz).
"""
from __future__ import annotations

import gzip
import json
import math
import pathlib
from typing import Optional

import torch


# A trace is the forward pass of one model on one graph as DGL runs it, as JSON: every top-level
# torch call (captured with a TorchFunctionMode), every gspmm/gsddmm call DGL's autograd functions
# make (dgl.backend.pytorch.sparse._gspmm/_gsddmm), and edge_softmax as one op. Values are numbered;
# an argument is a value, a parameter (by state_dict name), the input features, a graph array
# (in/out-degrees) or a literal. Integers equal to the graph's node or edge count are stored as the
# symbols N and E, so a trace recorded on a scaled stand-in replays on the full-size graph (feature
# widths and classes stay literal: DGL's layers branch on them).

TRACE_VERSION = 1


class TraceError(RuntimeError):
    pass


def fn_name(func) -> str:
    """A name `resolve_fn` turns back into the same callable."""
    if getattr(func, "__name__", "") == "__get__" and hasattr(func, "__self__"):
        return "attr:" + func.__self__.__name__
    name = getattr(func, "__name__", None)
    qual = getattr(func, "__qualname__", name) or ""
    owner = qual.split(".")[0]
    if owner in ("Tensor", "TensorBase", "_TensorBase") and "." in qual:
        return "Tensor." + name
    if owner == "_VariableFunctionsClass" and getattr(torch, name, None) is func:
        return "torch:" + name
    module = getattr(func, "__module__", None)
    if module is None and getattr(torch.Tensor, name or "", None) is func:
        return "Tensor." + name
    if module and "<" not in qual:
        full = f"{module}:{qual}"
        try:
            if resolve_fn(full) is func:
                return full
        except (ImportError, AttributeError):
            pass
        if getattr(torch, name, None) is func:
            return "torch:" + name
    raise TraceError(f"cannot name {func!r} ({module}:{qual})")


def resolve_fn(name: str):
    import importlib

    if name.startswith("attr:"):
        attr = name[5:]
        return lambda obj: getattr(obj, attr)
    if name.startswith("Tensor."):
        return getattr(torch.Tensor, name[7:])
    module, qual = name.split(":", 1)
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


class _Recorder:
    def __init__(self, model, feat, n, e, in_deg, out_deg):
        self.ops, self.values, self.keep = [], {}, []
        self.params = {id(t): name for name, t in list(model.named_parameters()) + list(model.named_buffers())}
        self.feat, self.n, self.e = feat, n, e
        self.in_deg, self.out_deg = in_deg, out_deg
        self.depth = 0
        self.next_id = 0
        self.consts = 0
        self.opaque = 0

    def new_value(self, t) -> int:
        vid = self.next_id
        self.next_id += 1
        self.values[id(t)] = vid
        self.keep.append(t)
        return vid

    def ref(self, t):
        vid = self.values.get(id(t))
        if vid is not None:
            return {"v": vid}
        if id(t) in self.params:
            return {"param": self.params[id(t)]}
        if t is self.feat:
            return {"input": "feat"}
        for name, ref in (("in_degrees", self.in_deg), ("out_degrees", self.out_deg)):
            if t.shape == ref.shape and t.dtype == ref.dtype and torch.equal(t, ref):
                return {"graph": name}
        if t.numel() <= 64:
            self.consts += 1
            return {"const": t.detach().cpu().tolist(), "dtype": str(t.dtype).replace("torch.", ""),
                    "shape": list(t.shape)}
        # A tensor DGL's C API made (e.g. has_nodes' check inside out_degrees): it feeds DGL's own
        # argument checks only; replayed as ones of its shape. Were it to reach the output, the
        # replay check against DGL's output (record_all, the tests) would fail.
        self.opaque += 1
        return {"opaque": [self.enc(i) for i in t.shape], "dtype": str(t.dtype).replace("torch.", "")}

    def enc(self, x):
        if isinstance(x, torch.Tensor):
            return self.ref(x)
        if isinstance(x, bool) or x is None or isinstance(x, str):
            return x
        if isinstance(x, int):
            if x == self.n and x != self.e:
                return {"sym": "N"}
            if x == self.e and x != self.n:
                return {"sym": "E"}
            return x
        if isinstance(x, float):
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(x, torch.Size):
            return {"size": [self.enc(i) for i in x]}
        if isinstance(x, (tuple, list)):
            return {"tuple" if isinstance(x, tuple) else "list": [self.enc(i) for i in x]}
        if isinstance(x, dict):
            return {"dict": {k: self.enc(v) for k, v in x.items()}}
        if isinstance(x, torch.dtype):
            return {"dtype": str(x).replace("torch.", "")}
        if isinstance(x, torch.device):
            return {"device": True}
        if isinstance(x, slice):
            return {"slice": [self.enc(x.start), self.enc(x.stop), self.enc(x.step)]}
        if x is Ellipsis:
            return {"ellipsis": True}
        raise TraceError(f"cannot encode an argument of type {type(x).__name__}")

    def outs(self, result):
        if isinstance(result, torch.Tensor):
            return self.new_value(result)
        return [self.new_value(r) if isinstance(r, torch.Tensor) else None for r in result]

    def shape(self, t):
        return None if t is None else [self.enc(i) for i in t.shape]


def _traced_result(result) -> bool:
    if result is None or isinstance(result, torch.Tensor):
        return True
    return isinstance(result, (tuple, list)) and len(result) > 0 and all(
        isinstance(r, torch.Tensor) or r is None for r in result) and any(isinstance(r, torch.Tensor) for r in result)


def record_trace(model, g, feat, model_name: str = "", graph_name: str = "", prepare: Optional[str] = None):
    """(trace dict, output) of one eval forward of `model` on DGL graph `g` (run on DGL's own
    kernels, the plugin off)."""
    import sys as _sys

    import dgl_ugraph
    from dgl.backend.pytorch import sparse
    from torch.overrides import TorchFunctionMode

    es_module = _sys.modules["dgl.ops.edge_softmax"]
    rec = _Recorder(model, feat, g.num_nodes(), g.num_edges(), g.in_degrees(), g.out_degrees())

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if rec.depth:
                return func(*args, **kwargs)
            result = func(*args, **kwargs)
            if _traced_result(result):
                name = fn_name(func)
                node = {"op": "torch", "fn": name, "args": [rec.enc(a) for a in args],
                        "kwargs": {k: rec.enc(v) for k, v in kwargs.items()}}
                node["out"] = None if result is None else rec.outs(result)
                rec.ops.append(node)
            return result

    def sparse_wrapper(kind, original):
        def wrapper(gidx, op, *rest):
            rec.depth += 1
            try:
                result = original(gidx, op, *rest)
            finally:
                rec.depth -= 1
            if kind == "gspmm":
                reduce_op, u, e = rest
                args = {"op": op, "reduce_op": reduce_op, "u": None if u is None else rec.enc(u),
                        "e": None if e is None else rec.enc(e)}
                out = [rec.new_value(result[0])] + [rec.new_value(a) if a is not None else None for a in result[1]]
            else:
                lhs, rhs = rest[0], rest[1]
                lt, rt = (rest[2], rest[3]) if len(rest) > 2 else ("u", "v")
                args = {"op": op, "lhs": None if lhs is None else rec.enc(lhs),
                        "rhs": None if rhs is None else rec.enc(rhs), "lhs_target": lt, "rhs_target": rt}
                out = rec.new_value(result)
            rec.ops.append({"op": kind, "args": args, "reverse": gidx.number_of_nodes(0) != g.num_src_nodes()
                            and False, "out": out})
            return result
        return wrapper

    def softmax_wrapper(original):
        def wrapper(gidx, logits, eids, norm_by):
            rec.depth += 1
            try:
                result = original(gidx, logits, eids, norm_by)
            finally:
                rec.depth -= 1
            from dgl.base import is_all
            if not is_all(eids):
                raise TraceError("edge_softmax on a subset of edges is not traced")
            rec.ops.append({"op": "edge_softmax", "args": {"logits": rec.enc(logits), "norm_by": norm_by},
                            "out": rec.new_value(result)})
            return result
        return wrapper

    with dgl_ugraph.disabled():
        saved = (sparse._gspmm, sparse._gsddmm, es_module.edge_softmax_internal)
        sparse._gspmm = sparse_wrapper("gspmm", saved[0])
        sparse._gsddmm = sparse_wrapper("gsddmm", saved[1])
        es_module.edge_softmax_internal = softmax_wrapper(saved[2])
        try:
            model.eval()
            with torch.no_grad(), Mode():
                out = model(g, feat)
        finally:
            sparse._gspmm, sparse._gsddmm, es_module.edge_softmax_internal = saved
    if id(out) not in rec.values:
        raise TraceError("the model's output was not produced by a traced op")
    params = {name: {"shape": [rec.enc(i) for i in t.shape], "dtype": str(t.dtype).replace("torch.", "")}
              for name, t in list(model.named_parameters()) + list(model.named_buffers())}
    trace = {"version": TRACE_VERSION, "model": model_name, "graph": graph_name, "prepare": prepare,
             "N": g.num_nodes(), "E": g.num_edges(), "feat": list(feat.shape[1:]),
             "params": params, "output": rec.values[id(out)], "ops": rec.ops,
             "counts": _op_counts(rec.ops), "literal_consts": rec.consts, "opaque_inputs": rec.opaque}
    for op in trace["ops"]:
        op.pop("reverse", None)
    return trace, out


def _op_counts(ops) -> dict:
    counts = {}
    for op in ops:
        key = op["op"] if op["op"] != "torch" else op["fn"]
        if op["op"] == "gspmm":
            key = f"gspmm:{op['args']['op']}:{op['args']['reduce_op']}"
        elif op["op"] == "gsddmm":
            a = op["args"]
            key = f"gsddmm:{a['op']}:{a['lhs_target']}:{a['rhs_target']}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def trace_path(traces_dir, model_name: str) -> pathlib.Path:
    """A model's trace file: <model>.json.gz (a plain <model>.json is read where no .gz is)."""
    path = pathlib.Path(traces_dir) / f"{model_name}.json.gz"
    plain = path.with_suffix("")
    return plain if not path.exists() and plain.exists() else path


def save_traces(path, model_name: str, per_graph: dict) -> None:
    """Writes a model's traces ({graph: trace}) as JSON, gzip'd when path ends in .gz (mtime 0: the
    same traces give the same bytes)."""
    text = json.dumps({"version": TRACE_VERSION, "model": model_name, "traces": per_graph}, separators=(",", ":"))
    path = pathlib.Path(path)
    if path.suffix == ".gz":
        with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
            fh.write(text.encode())
    else:
        path.write_text(text)


def load_traces(path) -> dict:
    """A trace file as save_traces wrote it: {"version", "model", "traces": {graph: trace}}."""
    path = pathlib.Path(path)
    with (gzip.open(path, "rt") if path.suffix == ".gz" else open(path)) as fh:
        return json.load(fh)
