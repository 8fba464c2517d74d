"""How a CUDA call's parallel configuration is chosen: the hand-written rules, the learned model
(evaluation only; dgl_ugraph.tuning trains it), the autotune cache, and `policy`, the one place
that decides between them. May import dgl_ugraph.core, never the layers above."""
