// Code-generation knobs shared by the kernels.
#ifndef UGRAPH_CPU_SIMD_H_
#define UGRAPH_CPU_SIMD_H_

#include <cstdint>

// The build targets baseline x86-64 so the wheel runs anywhere; the hot per-thread functions
// are also compiled for x86-64-v3 (AVX2, FMA) and picked at load time by GCC's ifunc
// resolver. Only functions called from inside a parallel region carry it: GCC outlines the
// parallel region before it clones, so an outlined body would miss the clone.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define UG_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define UG_CLONES
#endif

namespace ugraph {
namespace cpu {

// Asks for the cache lines of [p, p + bytes) ahead of use. The gathers of source rows are
// random, so the hardware prefetchers cannot see them coming; a few edges of lead hide most of
// the DRAM latency.
inline void prefetch_span(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_SIMD_H_
