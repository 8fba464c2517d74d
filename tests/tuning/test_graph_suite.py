"""graph_suite's shared datasets: the whole folder (shared_datasets) and one graph by name
(shared_dataset) read the same arrays, from the folder DGL_UGRAPH_DATASETS names."""
import numpy as np
import torch

from dgl_ugraph.tuning import graph_suite as gs


def test_one_dataset_by_name_reads_what_the_folder_reads(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    for name, n in (("alpha", 7), ("beta", 11)):
        src, dst = rng.integers(0, n, 20, dtype=np.int32), rng.integers(0, n, 20, dtype=np.int32)
        np.savez(tmp_path / f"{name}.npz", src=src, dst=dst, num_nodes=n)
    monkeypatch.setenv("DGL_UGRAPH_DATASETS", str(tmp_path))
    every = {name: (src, dst, n) for name, src, dst, n in gs.shared_datasets()}
    assert sorted(every) == ["alpha", "beta"]
    for name, (src, dst, n) in every.items():
        one = gs.shared_dataset(name)
        assert one[2] == n and torch.equal(one[0], src) and torch.equal(one[1], dst)
        assert one[0].dtype == torch.int64
    assert gs.shared_dataset("gamma") is None
