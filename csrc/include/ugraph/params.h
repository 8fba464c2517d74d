/* The one contract between Python and the compiled core.
 *
 * Python validates and allocates; the core only reads the struct. Every index array has the
 * width index_bits (32 or 64). Positions p in [0, num_edges) enumerate edges in CSC order
 * (sorted by destination): col[p] is the source, row[p] the destination, eid[p] the edge id
 * that addresses edge-typed tensors (NULL means eid[p] == p).
 *
 * For each output row r of C and each output element j in [0, out_len):
 *   msg(p, j) = edge_op(A[ia(p)][a_off[j]*K .. +K], B[ib(p)][b_off[j]*K .. +K])
 * where ia/ib pick col[p], row[p] or eid[p] by the tensor's type and K = reduce_size (K > 1 only
 * for dot, which sums the K products). Then
 *   gather none  : C[eid(p)][j] = msg(p, j)                       (C typed edge)
 *   gather sum   : C[v][j] = sum over p in row v of msg(p, j)      (C typed dst)
 *   gather max/min: C[v][j] = first msg(p, j) in CSC order that is strictly better than every
 *                  earlier one, starting from reduce_zero(dtype) (DGL's ReduceOp::zero():
 *                  -inf/+inf, or -65504/+65504 for float16). NaN never wins. arg_a/arg_b (when
 *                  not NULL) receive ia(p)/ib(p) of the winner, 0 where nothing won (arg_bits
 *                  wide).
 *   gather mean  : C[v][j] = (gather sum's C[v][j]) / max(1, indptr[v + 1] - indptr[v]), the mean
 *                  of dgl.ops.gspmm, divided in the kernel rather than by a pass over C.
 * Half types accumulate in float32. The core writes every element of C, arg_a and arg_b.
 */
#ifndef UGRAPH_PARAMS_H_
#define UGRAPH_PARAMS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DGL's operator names, in patterns/switching_table.json's order. */
enum UgEdgeOp { UG_COPY_LHS = 0, UG_COPY_RHS = 1, UG_ADD = 2, UG_SUB = 3, UG_MUL = 4, UG_DIV = 5, UG_DOT = 6 };
enum UgGatherOp { UG_GATHER_NONE = 0, UG_SUM = 1, UG_MAX = 2, UG_MIN = 3, UG_MEAN = 4 };
enum UgTensorType { UG_NULL = 0, UG_SRC = 1, UG_DST = 2, UG_EDGE = 3 };
enum UgDType { UG_F32 = 0, UG_F64 = 1, UG_F16 = 2, UG_BF16 = 3 };
enum UgStrategy { UG_THREAD_VERTEX = 0, UG_THREAD_EDGE = 1, UG_WARP_VERTEX = 2, UG_WARP_EDGE = 3 };

enum UgStatus {
  UG_OK = 0,
  UG_ERR_INVALID = 1,       /* the struct breaks the contract above */
  UG_ERR_UNSUPPORTED = 2,   /* valid, but this strategy or build cannot run it */
  UG_ERR_WORKSPACE = 3,     /* workspace_bytes smaller than ug_*_workspace_bytes() asked for */
  UG_ERR_CUDA = 4           /* a CUDA call failed; ug_cuda_last_error() has the text */
};

/* The length past which a row is long (UgParams.long_rows). */
#define UG_LONG_ROW 32

typedef struct UgParams {
  /* graph */
  int64_t num_src, num_dst, num_edges;
  int32_t index_bits;
  const void* indptr; /* [num_dst + 1] */
  const void* col;    /* [num_edges] */
  const void* row;    /* [num_edges] */
  const void* eid;    /* [num_edges] or NULL */
  /* The long rows, for the CUDA vertex strategies, which give a row long enough to hold up its
   * team's warp a whole block of its own (team.cuh): max_degree, the largest in-degree; long_rows,
   * every destination row of more than UG_LONG_ROW edges (index_bits wide), longest first.
   * max_degree 0 or long_rows NULL: every row stays with its team. */
  int64_t max_degree;
  const void* long_rows; /* [num_long_rows] or NULL */
  int64_t num_long_rows;

  /* operator */
  int32_t edge_op, gather_op;
  int32_t a_type, b_type, c_type;
  int32_t dtype;
  const void* a;
  const void* b;
  void* c;
  int64_t a_row_stride, b_row_stride; /* elements between rows; a row's features are contiguous */
  void* arg_a;
  void* arg_b;
  /* The width of arg_a's and arg_b's elements: 0 or index_bits (the graph's), or 64 on a 32-bit
   * graph (a DGL graph of int64 ids run on 32-bit indices, whose args DGL reads as int64). */
  int32_t arg_bits;
  int64_t out_len, a_len, b_len, reduce_size;
  const int64_t* a_off; /* [out_len] or NULL for identity; on the device that runs the op */
  const int64_t* b_off;
  /* A promise about b_off: it is constant on each aligned block of b_off_block consecutive
   * output elements (0 or 1 promise nothing). Then a CUDA lane that owns such a block reads
   * one value of B for it (u_mul_e's edge weight, a GAT head's attention). */
  int64_t b_off_block;

  /* parallel info */
  int32_t strategy, grouping, tiling;
  void* workspace;
  int64_t workspace_bytes;
  /* 1: the workspace holds zeros when the call starts, and the call leaves it so. The CUDA edge
   * strategies' max/min and half sums then need no pass that clears it before they aggregate
   * (a launch less on a small graph); their finishing pass clears what it read. 0: any
   * contents. Read only where ug_cuda_workspace_bytes asks for a workspace. */
  int32_t workspace_zeroed;
} UgParams;

#ifdef __cplusplus
}
#endif

#endif /* UGRAPH_PARAMS_H_ */
