/* Edge softmax, fused: DGL's edge_softmax over the in-edges of each destination row, in one pass
 * over the CSC per row instead of the five generalized calls it lowers to.
 *
 * For each destination v and each element j of the len elements of an edge row:
 *   forward : m = max over v's in-edges of x[e][j] (NaN never wins, as in DGL's std::max),
 *             z[e][j] = exp(x[e][j] - m), s = sum of z[.][j] in CSC order,
 *             out[e][j] = z[e][j] / s
 *   backward: x = the forward's output, y = x * (its output gradient);
 *             s = sum of y[.][j] in CSC order, out[e][j] = y[e][j] - s * x[e][j]
 * in the order and with the operations of DGL's CPU kernels (EdgeSoftmaxForward/Backward), so
 * float64 gives DGL's values bit for bit; float32 too, except that its exp is computed inline
 * (within 1 ulp of libm's, and 0 below exp's smallest normal result) so that it vectorizes.
 * Half types round every intermediate to their type (as DGL's do) but sum in float32 (DGL
 * rounds its running sum at every edge).
 * Edge e of CSC position p is eid[p] (NULL: p). Edge rows are contiguous, len elements apart.
 * Rows without in-edges write nothing; every edge belongs to exactly one row.
 * A C entry point of the CPU core, kept out of csrc/include: that folder is part of the CUDA
 * library's source hash (csrc/source_hash.py), which this CPU-only kernel must not change.
 */
#ifndef UGRAPH_CPU_SOFTMAX_H_
#define UGRAPH_CPU_SOFTMAX_H_

#include <stdint.h>

#include "ugraph/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct UgSoftmaxParams {
  int64_t num_dst, num_edges;
  int32_t index_bits; /* 32 or 64 */
  const void* indptr; /* [num_dst + 1] */
  const void* eid;    /* [num_edges] or NULL */
  int32_t dtype;      /* UgDType */
  int64_t len;        /* elements per edge row */
  const void* x;      /* forward: the scores; backward: the forward's output */
  const void* y;      /* backward: output * output gradient; forward: unused */
  void* out;          /* [num_edges][len] */
} UgSoftmaxParams;

/* UG_OK, or UG_ERR_INVALID with the reason in ug_cpu_last_error(). */
int ug_cpu_edge_softmax_forward(const UgSoftmaxParams* p);
int ug_cpu_edge_softmax_backward(const UgSoftmaxParams* p);

#ifdef __cplusplus
}
#endif

#endif /* UGRAPH_CPU_SOFTMAX_H_ */
