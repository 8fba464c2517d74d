/* Probe (session 36): a sum that walks the edges in edge-id order and adds each message into its
 * destination row with vector atomics, so that an edge operand (u_mul_e's weight, GAT's
 * attention) is read sequentially instead of gathered through eid. Not a strategy of the
 * selector: bench/raw/s36/probe_edge_order_sum.py times it against the selector's choice.
 *
 * The params are a checked call's (ug_cuda_check) with col and row holding the source and the
 * destination of every edge in edge-id order (UGraph.edge_order) and eid NULL; indptr stays the
 * CSC's. gather sum or mean, float32 or float64, edge ops that are not dot. C is cleared first
 * (a memset on the stream). Returns a UgStatus (ug_cuda_last_error has the reason). */
#ifndef UGRAPH_EDGE_ORDER_SUM_H_
#define UGRAPH_EDGE_ORDER_SUM_H_

#include "ugraph/params.h"

#ifdef __cplusplus
extern "C" {
#endif

int ug_cuda_run_edge_order_sum(const UgParams* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* UGRAPH_EDGE_ORDER_SUM_H_ */
