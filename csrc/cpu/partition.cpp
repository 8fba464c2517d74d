#include "partition.h"

#include <omp.h>

namespace ugraph {
namespace cpu {

int threads_for(int64_t work) {
  // About 20 us of single-thread work: below it, waking a team costs more than it saves.
  constexpr int64_t kWorkPerThread = 1 << 15;
  const int64_t wanted = work / kWorkPerThread;
  const int most = omp_get_max_threads();
  if (wanted < 1) return 1;
  return wanted < most ? int(wanted) : most;
}

}  // namespace cpu
}  // namespace ugraph
