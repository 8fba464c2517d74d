/* The fused edge softmax on CUDA: csrc/cpu/softmax.h's operator and UgSoftmaxParams, queued on a
 * CUDA stream (nothing is allocated or synchronized). DGL's CUDA EdgeSoftmax runs it as five
 * calls (copy_e max, e_sub_v, exp, copy_e sum, e_div_v), each a pass over the edge tensor; here
 * one launch reads each destination row's scores three times (max, sum, write), the last two
 * from cache; rows too long for a team take a warp or a block, in launches of their own. The
 * results follow DGL's CUDA operations in float (float64 for float64): a maximum that NaN never
 * wins, from DGL's reduce zero (-inf; -65504 for float16), exp(x - max) summed in a butterfly
 * order, then divided, rounded once to the dtype where DGL's chain rounds each of its five
 * results. x, y and out are device memory; y and out have x's layout. */
#ifndef UGRAPH_CUDA_SOFTMAX_H_
#define UGRAPH_CUDA_SOFTMAX_H_

#include "cpu/softmax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The graph's long rows (params.h's max_degree and long_rows): max_degree, the largest in-degree;
 * long_rows, every row of more than UG_LONG_ROW in-edges (index_bits wide, device memory), longest
 * first. Those too long for a team get a warp each, the longest a block each. */
typedef struct UgSoftmaxRows {
  int64_t max_degree;
  const void* long_rows; /* [num_long_rows] or NULL */
  int64_t num_long_rows;
} UgSoftmaxRows;

/* A softmax split in two launches, for graphs whose edge ids scatter each row's edges over the
 * tensors: in one launch every row's x (and y) is read and its out written at scattered edge rows,
 * a 32-byte sector for a 4-byte score. Split, the row kernels keep each row's statistics in a
 * workspace (the forward's maxima and sums of x, the backward's sums of y, which reads no x), and
 * a second launch writes every edge id's out in edge-id order, x, y and out coalesced. The values
 * are the one launch's: the same statistics in the same order, the same rounding.
 * edge_dst: the destination of each edge id ([num_edges], index_bits wide); stats: a workspace of
 * num_dst x len float (double for float64) for the backward, twice that for the forward. Both
 * device memory. */
typedef struct UgSoftmaxSplit {
  const void* edge_dst;
  void* stats;
} UgSoftmaxSplit;

/* UG_OK; UG_ERR_INVALID for a broken contract, UG_ERR_CUDA for a failed launch (the reason in
 * ug_cuda_last_error()). indptr's values, long_rows and edge_dst are trusted: they are device
 * memory. rows NULL: every row stays with its team (correct, slower where one row holds many
 * edges). split NULL: one launch. */
int ug_cuda_edge_softmax_forward(const UgSoftmaxParams* p, const UgSoftmaxRows* rows, const UgSoftmaxSplit* split,
                                 void* stream);
int ug_cuda_edge_softmax_backward(const UgSoftmaxParams* p, const UgSoftmaxRows* rows, const UgSoftmaxSplit* split,
                                  void* stream);

#ifdef __cplusplus
}
#endif

#endif /* UGRAPH_CUDA_SOFTMAX_H_ */
