#include "memory.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
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

int64_t gathered_bytes(const UgParams& p) {
  const int64_t elem = p.dtype == UG_F64 ? 8 : p.dtype == UG_F32 ? 4 : 2;
  auto bytes = [&](int type, int64_t row_stride, int64_t row_len, bool used) -> int64_t {
    if (!used || type == UG_DST || (type == UG_EDGE && !p.eid)) return 0;  // streamed in CSC order
    const int64_t rows = type == UG_SRC ? p.num_src : p.num_edges;
    return rows > 0 ? ((rows - 1) * row_stride + row_len) * elem : 0;
  };
  return bytes(p.a_type, p.a_row_stride, p.a_len * p.reduce_size, p.edge_op != UG_COPY_RHS) +
         bytes(p.b_type, p.b_row_stride, p.b_len * p.reduce_size, p.edge_op != UG_COPY_LHS);
}

int64_t l2_cache_bytes() {
  static const int64_t bytes = [] {
    int64_t b = 0;
#if defined(__linux__) && defined(_SC_LEVEL2_CACHE_SIZE)
    b = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return b > 0 ? b : int64_t(1) << 20;
  }();
  return bytes;
}

}  // namespace cpu
}  // namespace ugraph
