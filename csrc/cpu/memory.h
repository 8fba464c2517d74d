// Memory: getting fresh output pages faulted in cheaply, and whether gathers need prefetching.
#ifndef UGRAPH_CPU_MEMORY_H_
#define UGRAPH_CPU_MEMORY_H_

#include <cstdint>

#include "ugraph/params.h"

namespace ugraph {
namespace cpu {

// Outputs come fresh from torch's allocator, and large ones straight from mmap: their first
// write faults them in 4 KiB at a time, which for a 200K x 64 max/min (51 MB of values, 102 MB
// of int64 args) costs more than the kernel itself (about 55 ms of the kernel's 100 here). So
// before writing, ask for transparent huge pages over the whole 2 MiB pages inside a large
// output (MADV_HUGEPAGE; a hint: it changes no contents, pages already present stay, and
// nothing happens where THP is off). Outputs under kHugeOutputBytes are left alone.
void advise_huge_pages(void* data, int64_t bytes);

constexpr int64_t kHugeOutputBytes = int64_t(16) << 20;

// Bytes of the operands that a kernel gathers through an index (src rows, or edge rows through
// eid), which the hardware prefetchers cannot follow.
int64_t gathered_bytes(const UgParams& p);

// The per-core L2 size (1 MiB where the OS does not say). Read once.
int64_t l2_cache_bytes();

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_MEMORY_H_
