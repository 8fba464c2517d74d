#include <cstdlib>
#include <cstring>

#include "simd.h"

namespace ugraph {
namespace cpu {
namespace {

int detect() {
#if UG_MULTIVERSION
  int level = __builtin_cpu_supports("x86-64-v4") ? 4 : __builtin_cpu_supports("x86-64-v3") ? 3 : 0;
#else
  int level = 0;
#endif
  if (const char* cap = std::getenv("DGL_UGRAPH_CPU_ISA")) {
    const int most = !std::strcmp(cap, "baseline") ? 0 : !std::strcmp(cap, "v3") ? 3 : 4;
    if (most < level) level = most;
  }
  return level;
}

}  // namespace

int isa_level() {
  static const int level = detect();
  return level;
}

}  // namespace cpu
}  // namespace ugraph
