"""The DGL layer: replaces DGL's gspmm/gsddmm (and its CPU fused edge softmax) and routes each
call (`interception`), decides once per graph and signature whether dgl_ugraph runs it exactly as
DGL would (`recognition`, with the switching table in `patterns`), keeps the graph tensors per set
of DGL arrays (`cache`) and counts what ran where (`stats`). Imports DGL only when it is used,
and by absolute imports: `import dgl` here is DGL itself, never this package.
"""
