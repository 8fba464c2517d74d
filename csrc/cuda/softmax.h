/* The fused edge softmax on CUDA: csrc/cpu/softmax.h's operator and UgSoftmaxParams, queued on a
 * CUDA stream (nothing is allocated or synchronized). DGL's CUDA EdgeSoftmax runs it as five
 * calls (copy_e max, e_sub_v, exp, copy_e sum, e_div_v), each a pass over the edge tensor; here
 * one launch reads each destination row's scores three times (max, sum, write), the last two
 * from cache. The results follow DGL's CUDA operations in float (float64 for float64): a maximum
 * that NaN never wins, from DGL's reduce zero (-inf; -65504 for float16), exp(x - max) summed in
 * a butterfly order, then divided, rounded once to the dtype where DGL's chain rounds each of
 * its five results. x, y and out are device memory; y and out have x's layout. */
#ifndef UGRAPH_CUDA_SOFTMAX_H_
#define UGRAPH_CUDA_SOFTMAX_H_

#include "cpu/softmax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* UG_OK; UG_ERR_INVALID for a broken contract, UG_ERR_CUDA for a failed launch (the reason in
 * ug_cuda_last_error()). indptr's values are trusted: they are device memory. */
int ug_cuda_edge_softmax_forward(const UgSoftmaxParams* p, void* stream);
int ug_cuda_edge_softmax_backward(const UgSoftmaxParams* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* UGRAPH_CUDA_SOFTMAX_H_ */
