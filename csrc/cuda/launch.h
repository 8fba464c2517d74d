// The launchers of the four strategies. Each is defined in its <strategy>.cuh and explicitly
// instantiated per (DType, IdType) in instantiations/<strategy>_<dtype>.cu (generate_kernels.py),
// so that a build compiles only the keys it asks for and ugraph_cuda.cu compiles none.
// All take validated params (ug_cuda_check), queue work on `stream` without synchronizing or
// allocating, and return the first CUDA error.
#pragma once

#include <cuda_runtime.h>

#include "ugraph/params.h"

namespace ugraph {

template <typename DType, typename IdType>
cudaError_t run_thread_vertex(const UgParams& p, cudaStream_t stream);
template <typename DType, typename IdType>
cudaError_t run_thread_edge(const UgParams& p, cudaStream_t stream);
template <typename DType, typename IdType>
cudaError_t run_warp_vertex(const UgParams& p, cudaStream_t stream);
template <typename DType, typename IdType>
cudaError_t run_warp_edge(const UgParams& p, cudaStream_t stream);

}  // namespace ugraph
