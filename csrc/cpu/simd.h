// Code-generation knobs shared by the kernels.
#ifndef UGRAPH_CPU_SIMD_H_
#define UGRAPH_CPU_SIMD_H_

#include <cstdint>

// The build targets baseline x86-64 so the wheel runs anywhere. The hot per-thread functions
// also exist compiled for x86-64-v3 (AVX2, FMA), and max/min aggregation for x86-64-v4
// (AVX-512), as explicit UG_TARGET_V3/V4 twins; isa_level() picks one at run time. Only
// functions called from inside a parallel region carry these: GCC outlines a parallel region
// into a function of its own, which would not inherit the target.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define UG_MULTIVERSION 1
#define UG_TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#define UG_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#else
#define UG_MULTIVERSION 0
#define UG_TARGET_V3
#define UG_TARGET_V4
#endif

// Everything a multiversioned function calls must be inlined into it, or the call lands in one
// baseline-x86-64 copy shared by all versions and the version gains nothing.
#define UG_INLINE inline __attribute__((always_inline))

namespace ugraph {
namespace cpu {

// The instruction-set level the twins may use: 4 (x86-64-v4), 3 (x86-64-v3) or 0 (baseline).
// It is what the CPU runs, capped by DGL_UGRAPH_CPU_ISA=baseline|v3|v4 if set, so that one
// machine can test every version. Read once.
int isa_level();

// Asks for the cache lines of [p, p + bytes) ahead of use. The gathers of source rows are
// random, so the hardware prefetchers cannot see them coming; a few edges of lead hide most of
// the DRAM latency.
UG_INLINE void prefetch_span(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_SIMD_H_
