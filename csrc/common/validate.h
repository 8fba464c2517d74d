// The one check of a UgParams against params.h, shared by both backends: ug_cpu_run and
// ug_cuda_run call it before any kernel touches memory, and _C.validate exposes it to Python so
// that a test can hold the two backends to the same answers.
#ifndef UGRAPH_COMMON_VALIDATE_H_
#define UGRAPH_COMMON_VALIDATE_H_

#include <string>

#include "ugraph/params.h"

namespace ugraph {

enum class Backend { kCpu, kCuda };

// UG_OK, or UG_ERR_INVALID with the reason in *why. The two backends differ in exactly two ways:
//  - only CUDA reads the parallel info (strategy, grouping, tiling), so only CUDA checks it;
//  - only the CPU can read the arrays behind the pointers without a device synchronization, so
//    only the CPU checks the data: indptr from 0 to num_edges, never decreasing (aggregation
//    partitions rows by it), and broadcast offsets within their rows. On CUDA, Python builds
//    both itself (dgl_ugraph/graph.py, abstraction.broadcast). col/row/eid are scanned by
//    neither: that O(E) pass would cost as much as a light kernel.
int validate(const UgParams& p, Backend backend, std::string* why);

}  // namespace ugraph

#endif  // UGRAPH_COMMON_VALIDATE_H_
