#include "forest.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace ugraph {

namespace {

constexpr double kZeroThreshold = 1e-35;  // LightGBM's kZeroThreshold
constexpr uint8_t kMissingZero = 1, kMissingNaN = 2;

[[noreturn]] void corrupt(const char* what, int64_t node) {
  throw std::invalid_argument(std::string("forest: ") + what + " at node " + std::to_string(node));
}

// LightGBM's NumericalDecision, step for step.
inline bool goes_left(double v, double threshold, uint8_t flags) {
  const uint8_t missing = flags >> 1;
  if (std::isnan(v) && missing != kMissingNaN) v = 0.0;
  if ((missing == kMissingZero && v >= -kZeroThreshold && v <= kZeroThreshold) ||
      (missing == kMissingNaN && std::isnan(v)))
    return flags & 1;
  return v <= threshold;
}

inline int32_t child(const ForestView& f, int32_t i, bool left) {
  const int32_t next = left ? f.left[i] : f.right[i];
  if (next >= 0 && (next <= i || next >= f.num_nodes)) corrupt("a child out of preorder", i);
  if (next < 0 && ~next >= f.num_leaves) corrupt("a missing leaf", i);
  return next;
}

inline int32_t feature_of(const ForestView& f, int32_t i, int64_t num_cols) {
  const int32_t feat = f.feature[i];
  if (feat < 0 || feat >= num_cols) corrupt("a split on a missing feature", i);
  return feat;
}

}  // namespace

void forest_predict(const ForestView& f, const double* x, int64_t num_rows, int64_t num_cols, double* out) {
  for (int64_t r = 0; r < num_rows; ++r) out[r] = 0.0;
  if (num_rows == 0) return;
  // The rows of one decision are the candidate configurations of one case: the case's features
  // are the same in every row. A split on such a column sends all rows the same way, so it is
  // decided once per tree, and only splits on varying columns partition the rows. That halves
  // the work of walking every row through every tree.
  std::vector<char> constant(num_cols);
  for (int64_t c = 0; c < num_cols; ++c) {
    const double v = x[c];
    bool same = true;
    for (int64_t r = 1; r < num_rows && same; ++r) {
      const double w = x[r * num_cols + c];
      same = (w == v) || (std::isnan(w) && std::isnan(v));
    }
    constant[c] = same;
  }
  std::vector<int32_t> rows(num_rows), spill(num_rows);
  struct Span {
    int32_t node;
    int64_t lo, hi;  // rows[lo, hi) reach node
  };
  std::vector<Span> stack;
  for (int64_t t = 0; t < f.num_trees; ++t) {
    const int32_t root = f.roots[t];
    if (root >= f.num_nodes || (root < 0 && ~root >= f.num_leaves)) corrupt("a root out of range", root);
    for (int64_t r = 0; r < num_rows; ++r) rows[r] = static_cast<int32_t>(r);
    stack.clear();
    stack.push_back({root, 0, num_rows});
    while (!stack.empty()) {
      const Span s = stack.back();
      stack.pop_back();
      int32_t i = s.node;
      while (i >= 0) {
        const int32_t feat = feature_of(f, i, num_cols);
        if (!constant[feat]) break;
        i = child(f, i, goes_left(x[feat], f.threshold[i], f.flags[i]));
      }
      if (i < 0) {
        const double v = f.leaf_value[~i];
        for (int64_t k = s.lo; k < s.hi; ++k) out[rows[k]] += v;
        continue;
      }
      // Stable partition of the span: rows going left first, then the rest.
      const int32_t feat = f.feature[i];
      const double threshold = f.threshold[i];
      const uint8_t flags = f.flags[i];
      int64_t mid = s.lo, spilled = 0;
      for (int64_t k = s.lo; k < s.hi; ++k) {
        const int32_t r = rows[k];
        const bool left = goes_left(x[static_cast<int64_t>(r) * num_cols + feat], threshold, flags);
        rows[mid] = r;
        spill[spilled] = r;
        mid += left;
        spilled += !left;
      }
      for (int64_t k = 0; k < spilled; ++k) rows[mid + k] = spill[k];
      if (s.hi > mid) stack.push_back({child(f, i, false), mid, s.hi});
      if (mid > s.lo) stack.push_back({child(f, i, true), s.lo, mid});
    }
  }
}

}  // namespace ugraph
