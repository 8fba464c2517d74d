// The steps of ug_cuda_run that other entry points of the CUDA core reuse (timing.cu): the
// check of a call and its launch, each answering with a status and a reason.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "ugraph/params.h"

namespace ugraph {

struct Verdict {
  int status;
  std::string why;
};

// params.h's contract, then what this build and the chosen strategy can run.
Verdict check_call(const UgParams* p);
// Queues a checked call on `stream`: its workspace is checked, nothing is allocated or synchronized.
Verdict enqueue(const UgParams& p, cudaStream_t stream);
// What ug_cuda_last_error reports on this thread.
void set_last_error(const std::string& why);

}  // namespace ugraph
