/* What each CUDA strategy can run, declared once. ug_cuda_check refuses a case that a hard rule
 * covers; Python's selection (dgl_ugraph/select.py) reads the same rules, as data, through
 * _C.capabilities(), and applies the preferences (only_deterministic) itself.
 * The names are params.h's enums in order: Python checks its own tuples against them. */
#ifndef UGRAPH_CAPABILITY_H_
#define UGRAPH_CAPABILITY_H_

#include <stdint.h>

#include "ugraph/params.h"

typedef struct UgRule {
  uint32_t strategies;        /* bit s: the rule covers UgStrategy s */
  uint32_t gather_ops;        /* bit g: UgGatherOp g */
  uint32_t dtypes;            /* bit d: UgDType d */
  int64_t min_edges;          /* the rule covers graphs with at least this many edges */
  int32_t only_deterministic; /* 1: not a limit of the kernel but a preference, applied when the
                                 caller asks for results that do not depend on thread timing */
  const char* why;            /* said after the strategy's name */
} UgRule;

#ifdef __cplusplus
namespace ugraph {

constexpr uint32_t bit(int i) { return uint32_t(1) << i; }
constexpr uint32_t kAllDTypes = bit(UG_F32) | bit(UG_F64) | bit(UG_F16) | bit(UG_BF16);
// The strategies whose workers share output rows and combine them with atomics.
constexpr uint32_t kAtomicStrategies = bit(UG_THREAD_EDGE) | bit(UG_WARP_EDGE);

inline constexpr UgRule kRules[] = {
    {kAtomicStrategies, bit(UG_MAX) | bit(UG_MIN), bit(UG_F64), 0, 0,
     "packs a max/min value and its position into one 64-bit atomic; float64 does not fit"},
    {kAtomicStrategies, bit(UG_MAX) | bit(UG_MIN), kAllDTypes, int64_t(1) << 32, 0,
     "packs edge positions into 32 bits; this graph has 2^32 edges or more"},
    {kAtomicStrategies, bit(UG_SUM) | bit(UG_MEAN), kAllDTypes, 0, 1,
     "adds with atomics in no fixed order, and deterministic mode is on"},
};
inline constexpr int kNumRules = sizeof(kRules) / sizeof(kRules[0]);

inline constexpr const char* kStrategyNames[] = {"thread_vertex", "thread_edge", "warp_vertex", "warp_edge"};
inline constexpr const char* kDTypeNames[] = {"f32", "f64", "f16", "bf16"};
inline constexpr const char* kGatherNames[] = {"none", "sum", "max", "min", "mean"};
inline constexpr int kNumStrategies = 4, kNumDTypes = 4;

// The first hard rule (only_deterministic 0) that covers p, or NULL.
inline const UgRule* refusing_rule(const UgParams& p) {
  for (const UgRule& r : kRules) {
    if (!r.only_deterministic && (r.strategies & bit(p.strategy)) && (r.gather_ops & bit(p.gather_op)) &&
        (r.dtypes & bit(p.dtype)) && p.num_edges >= r.min_edges) {
      return &r;
    }
  }
  return nullptr;
}

}  // namespace ugraph
#endif

#endif /* UGRAPH_CAPABILITY_H_ */
