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

/* UG_OK; UG_ERR_INVALID for a broken contract, UG_ERR_CUDA for a failed launch (the reason in
 * ug_cuda_last_error()). indptr's values and long_rows are trusted: they are device memory.
 * rows NULL: every row stays with its team (correct, slower where one row holds many edges). */
int ug_cuda_edge_softmax_forward(const UgSoftmaxParams* p, const UgSoftmaxRows* rows, void* stream);
int ug_cuda_edge_softmax_backward(const UgSoftmaxParams* p, const UgSoftmaxRows* rows, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* UGRAPH_CUDA_SOFTMAX_H_ */
