// Checks a UgParams against params.h before any kernel touches memory.
#ifndef UGRAPH_CPU_VALIDATE_H_
#define UGRAPH_CPU_VALIDATE_H_

#include "ugraph/params.h"

namespace ugraph {
namespace cpu {

// UG_OK, or UG_ERR_INVALID with the reason recorded for ug_cpu_last_error(). It checks every
// field the kernels use, the CSC's indptr (O(V): the work partition relies on it) and the
// broadcast offsets (O(out_len)). It does not scan col/row/eid: that O(E) pass would cost as
// much as a light kernel, and Python builds those arrays itself (dgl_ugraph/graph.py).
int validate(const UgParams& p);

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_VALIDATE_H_
