// The C API of ugraph/api.h for the CUDA backend: validation, the capability rules, and
// dispatch by strategy x dtype x index width to the launchers compiled into this build.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "launch.h"
#include "static_switch.h"
#include "ugraph/api.h"

// Set by csrc/cuda/CMakeLists.txt: bit (strategy * 4 + dtype) is set for each compiled key.
#ifndef UGRAPH_COMPILED_KEYS
#error "UGRAPH_COMPILED_KEYS is not defined: build through csrc/cuda/CMakeLists.txt"
#endif

namespace {

thread_local std::string g_last_error;

constexpr unsigned kCompiledKeys = UGRAPH_COMPILED_KEYS;

constexpr bool compiled(int strategy, int dtype) { return (kCompiledKeys >> (strategy * 4 + dtype)) & 1u; }

template <typename DType> constexpr int dtype_code();
template <> constexpr int dtype_code<float>() { return UG_F32; }
template <> constexpr int dtype_code<double>() { return UG_F64; }
template <> constexpr int dtype_code<__half>() { return UG_F16; }
template <> constexpr int dtype_code<__nv_bfloat16>() { return UG_BF16; }

const char* const kStrategyNames[] = {"thread_vertex", "thread_edge", "warp_vertex", "warp_edge"};
const char* const kDTypeNames[] = {"f32", "f64", "f16", "bf16"};

// Only keys compiled into this build are referenced, so a partial build links.
template <typename DType, typename IdType>
cudaError_t dispatch(const UgParams& p, cudaStream_t stream) {
  constexpr int d = dtype_code<DType>();
  switch (p.strategy) {
    case UG_THREAD_VERTEX:
      if constexpr (compiled(UG_THREAD_VERTEX, d)) return ugraph::run_thread_vertex<DType, IdType>(p, stream);
      break;
    case UG_THREAD_EDGE:
      if constexpr (compiled(UG_THREAD_EDGE, d)) return ugraph::run_thread_edge<DType, IdType>(p, stream);
      break;
    case UG_WARP_VERTEX:
      if constexpr (compiled(UG_WARP_VERTEX, d)) return ugraph::run_warp_vertex<DType, IdType>(p, stream);
      break;
    case UG_WARP_EDGE:
      if constexpr (compiled(UG_WARP_EDGE, d)) return ugraph::run_warp_edge<DType, IdType>(p, stream);
      break;
  }
  return cudaErrorNotSupported;  // unreachable: ug_cuda_check refused the key
}

struct Verdict {
  int status;
  std::string why;
};

Verdict invalid(std::string why) { return {UG_ERR_INVALID, std::move(why)}; }
Verdict unsupported(std::string why) { return {UG_ERR_UNSUPPORTED, std::move(why)}; }

bool is_node_or_edge(int type) { return type == UG_SRC || type == UG_DST || type == UG_EDGE; }

// One operand (A or B) that the edge op reads.
Verdict check_operand(const char* name, int type, const void* data, int64_t row_stride, int64_t len,
                      const int64_t* off, int64_t out_len) {
  const std::string n(name);
  if (!is_node_or_edge(type)) return invalid(n + " is read by the edge op but its type is not src, dst or edge");
  if (data == nullptr) return invalid(n + " is read by the edge op but is NULL");
  if (row_stride < 0) return invalid(n + "'s row stride is negative");
  if (len <= 0) return invalid(n + "'s length must be positive");
  if (off == nullptr && len < out_len) {
    return invalid(n + " has no broadcast offsets but fewer elements per row than out_len");
  }
  return {UG_OK, ""};
}

Verdict check(const UgParams* p) {
  if (p == nullptr) return invalid("params is NULL");
  if (p->strategy < UG_THREAD_VERTEX || p->strategy > UG_WARP_EDGE) {
    return invalid("strategy " + std::to_string(p->strategy) + " is not a UgStrategy");
  }
  if (p->dtype < UG_F32 || p->dtype > UG_BF16) {
    return invalid("dtype " + std::to_string(p->dtype) + " is not a UgDType");
  }
  if (p->edge_op < UG_COPY_LHS || p->edge_op > UG_DOT) {
    return invalid("edge_op " + std::to_string(p->edge_op) + " is not a UgEdgeOp");
  }
  if (p->gather_op < UG_GATHER_NONE || p->gather_op > UG_MIN) {
    return invalid("gather_op " + std::to_string(p->gather_op) + " is not a UgGatherOp");
  }
  const int g = p->grouping;
  if (g < 1 || g > 64 || (g & (g - 1)) != 0) {
    return invalid("grouping must be a power of two in 1..64, got " + std::to_string(g));
  }
  if (p->tiling < 1 || p->tiling > 64) return invalid("tiling must be in 1..64, got " + std::to_string(p->tiling));
  if (p->index_bits != 32 && p->index_bits != 64) {
    return invalid("index_bits must be 32 or 64, got " + std::to_string(p->index_bits));
  }
  if (p->num_src < 0 || p->num_dst < 0 || p->num_edges < 0) return invalid("graph sizes must not be negative");
  if (p->index_bits == 32 && (p->num_src > INT32_MAX || p->num_dst > INT32_MAX || p->num_edges > INT32_MAX)) {
    return invalid("a graph with more than 2^31 - 1 nodes or edges needs 64-bit indices");
  }
  if (p->indptr == nullptr) return invalid("indptr is NULL");
  if (p->num_edges > 0 && (p->col == nullptr || p->row == nullptr)) return invalid("col or row is NULL");

  const bool aggregate = p->gather_op != UG_GATHER_NONE;
  if (p->c_type != (aggregate ? UG_DST : UG_EDGE)) {
    return invalid(aggregate ? "an aggregation (sum/max/min) writes a dst-typed C"
                             : "message creation (gather none) writes an edge-typed C");
  }
  if (p->c == nullptr) return invalid("C is NULL");
  if (p->out_len <= 0) return invalid("out_len must be positive, got " + std::to_string(p->out_len));
  if (p->reduce_size < 1 || (p->edge_op != UG_DOT && p->reduce_size != 1)) {
    return invalid("reduce_size must be 1, or at least 1 for dot, got " + std::to_string(p->reduce_size));
  }
  if (p->edge_op != UG_COPY_RHS) {
    Verdict v = check_operand("A", p->a_type, p->a, p->a_row_stride, p->a_len, p->a_off, p->out_len);
    if (v.status != UG_OK) return v;
  }
  if (p->edge_op != UG_COPY_LHS) {
    Verdict v = check_operand("B", p->b_type, p->b, p->b_row_stride, p->b_len, p->b_off, p->out_len);
    if (v.status != UG_OK) return v;
  }

  if (!compiled(p->strategy, p->dtype)) {
    return unsupported(std::string(kStrategyNames[p->strategy]) + "/" + kDTypeNames[p->dtype] +
                       ": strategy/dtype not compiled into this build");
  }
  const bool edge_strategy = p->strategy == UG_THREAD_EDGE || p->strategy == UG_WARP_EDGE;
  if (edge_strategy && (p->gather_op == UG_MAX || p->gather_op == UG_MIN)) {
    if (p->dtype == UG_F64) {
      return unsupported(std::string(kStrategyNames[p->strategy]) +
                         " packs a max/min value and its position into one 64-bit atomic; float64 does not fit");
    }
    if (p->num_edges >= (int64_t(1) << 32)) {
      return unsupported(std::string(kStrategyNames[p->strategy]) +
                         " packs edge positions into 32 bits; this graph has " + std::to_string(p->num_edges) +
                         " edges");
    }
  }
  return {UG_OK, ""};
}

void copy_why(const std::string& why, char* out, int out_len) {
  if (out != nullptr && out_len > 0) std::snprintf(out, static_cast<size_t>(out_len), "%s", why.c_str());
}

}  // namespace

extern "C" {

int ug_cuda_check(const UgParams* p, char* why, int why_len) {
  const Verdict v = check(p);
  copy_why(v.why, why, why_len);
  return v.status;
}

int64_t ug_cuda_workspace_bytes(const UgParams* p) {
  if (p == nullptr || p->num_dst <= 0 || p->out_len <= 0) return 0;
  const bool edge_strategy = p->strategy == UG_THREAD_EDGE || p->strategy == UG_WARP_EDGE;
  if (!edge_strategy) return 0;
  const int64_t elements = p->num_dst * p->out_len;
  if (p->gather_op == UG_MAX || p->gather_op == UG_MIN) return elements * int64_t(sizeof(unsigned long long));
  if (p->gather_op == UG_SUM && (p->dtype == UG_F16 || p->dtype == UG_BF16)) return elements * int64_t(sizeof(float));
  return 0;
}

int ug_cuda_run(const UgParams* p, void* stream) {
  const Verdict v = check(p);
  if (v.status != UG_OK) {
    g_last_error = v.why;
    return v.status;
  }
  const int64_t need = ug_cuda_workspace_bytes(p);
  if (need > 0) {
    if (p->workspace == nullptr || p->workspace_bytes < need) {
      g_last_error = "the workspace has " + std::to_string(p->workspace == nullptr ? 0 : p->workspace_bytes) +
                     " bytes; this call needs " + std::to_string(need);
      return UG_ERR_WORKSPACE;
    }
    if (reinterpret_cast<uintptr_t>(p->workspace) % alignof(unsigned long long) != 0) {
      g_last_error = "the workspace must be 8-byte aligned";
      return UG_ERR_INVALID;
    }
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const cudaError_t err = UG_DTYPE_SWITCH(p->dtype, DType, [&] {
    return UG_INDEX_SWITCH(p->index_bits, IdType, [&] { return dispatch<DType, IdType>(*p, s); });
  });
  if (err != cudaSuccess) {
    g_last_error = std::string("CUDA error in ") + kStrategyNames[p->strategy] + "/" + kDTypeNames[p->dtype] + ": " +
                   cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
    return UG_ERR_CUDA;
  }
  return UG_OK;
}

const char* ug_cuda_source_hash(void) { return UGRAPH_SOURCE_HASH; }

const char* ug_cuda_build_info(void) {
  return "archs=" UGRAPH_CUDA_ARCHS ";kernels=" UGRAPH_KERNELS ";nvcc=" UGRAPH_NVCC_VERSION;
}

const char* ug_cuda_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
