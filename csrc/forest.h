// A tree-ensemble evaluator for the strategy predictor (dgl_ugraph/predictor.py): LightGBM's
// numerical trees flattened into arrays, scored for many rows at once. Plain C++, no libtorch,
// no Python: the binding hands it numpy arrays.
#pragma once

#include <cstdint>

namespace ugraph {

// Nodes in preorder: a child index >= 0 names a node after its parent, < 0 the leaf ~child.
// flags: bit 0 default_left, bits 1-2 LightGBM's missing type (0 None, 1 Zero, 2 NaN).
struct ForestView {
  const int32_t* feature;
  const double* threshold;
  const int32_t* left;
  const int32_t* right;
  const uint8_t* flags;
  int64_t num_nodes;
  const double* leaf_value;
  int64_t num_leaves;
  const int32_t* roots;  // per tree: its first node, or ~leaf for a one-leaf tree
  int64_t num_trees;
};

// out[r] = sum over trees of the leaf value that row r of x (num_rows x num_cols doubles) reaches,
// with LightGBM's decision rule. Every step is bounds-checked and must move forward in preorder,
// so corrupt arrays raise std::invalid_argument instead of reading astray or looping.
void forest_predict(const ForestView& forest, const double* x, int64_t num_rows, int64_t num_cols, double* out);

}  // namespace ugraph
