#include "memory.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ugraph {
namespace cpu {

void advise_huge_pages(void* data, int64_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (!data || bytes < kHugeOutputBytes) return;
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + uintptr_t(bytes)) & ~(kHuge - 1);
  // Only whole huge pages inside the output, so no other allocation's memory is touched. A
  // failure (an old kernel, a locked-down system) only means the faults stay small.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace cpu
}  // namespace ugraph
