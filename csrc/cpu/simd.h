// Code-generation knobs shared by the kernels.
#ifndef UGRAPH_CPU_SIMD_H_
#define UGRAPH_CPU_SIMD_H_

#include <cstdint>

// The build targets baseline x86-64 so the wheel runs anywhere. Hot per-thread functions also
// exist compiled for x86-64-v3 (AVX2, FMA), and some for x86-64-v4 (AVX-512), and the best one
// the CPU runs is picked at run time: by GCC's target_clones (UG_CLONES), or, where versions
// should differ in more than the instruction set, by explicit UG_TARGET_V3/V4 twins chosen with
// cpu_has_v3()/cpu_has_v4(). Only functions called from inside a parallel region carry these:
// GCC outlines the parallel region before it clones, so an outlined body would miss the clone.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define UG_MULTIVERSION 1
#define UG_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define UG_TARGET_V3 __attribute__((target("arch=x86-64-v3")))
#define UG_TARGET_V4 __attribute__((target("arch=x86-64-v4")))
#else
#define UG_MULTIVERSION 0
#define UG_CLONES
#define UG_TARGET_V3
#define UG_TARGET_V4
#endif

// Everything a multiversioned function calls must be inlined into it, or the call lands in one
// baseline-x86-64 copy shared by all versions and the version gains nothing.
#define UG_INLINE inline __attribute__((always_inline))

namespace ugraph {
namespace cpu {

// Whether this CPU runs x86-64-v3 / x86-64-v4 code (UG_TARGET_V3 / UG_TARGET_V4 functions).
inline bool cpu_has_v3() {
#if UG_MULTIVERSION
  static const bool has = __builtin_cpu_supports("x86-64-v3");
  return has;
#else
  return false;
#endif
}
inline bool cpu_has_v4() {
#if UG_MULTIVERSION
  static const bool has = __builtin_cpu_supports("x86-64-v4");
  return has;
#else
  return false;
#endif
}

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
