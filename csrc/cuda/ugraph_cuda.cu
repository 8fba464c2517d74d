// The C API of ugraph/api.h for the CUDA backend: validation, the capability rules, and
// dispatch by strategy x dtype x index width to the launchers compiled into this build.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/validate.h"
#include "entry.h"
#include "launch.h"
#include "static_switch.h"
#include "ugraph/api.h"
#include "ugraph/capability.h"

// Set by csrc/cuda/CMakeLists.txt: bit (strategy * 4 + dtype) is set for each compiled key.
#ifndef UGRAPH_COMPILED_KEYS
#error "UGRAPH_COMPILED_KEYS is not defined: build through csrc/cuda/CMakeLists.txt"
#endif

namespace {

using ugraph::Backend;
using ugraph::kDTypeNames;
using ugraph::kStrategyNames;

thread_local std::string g_last_error;

constexpr unsigned kCompiledKeys = UGRAPH_COMPILED_KEYS;

constexpr bool compiled(int strategy, int dtype) { return (kCompiledKeys >> (strategy * 4 + dtype)) & 1u; }

template <typename DType> constexpr int dtype_code();
template <> constexpr int dtype_code<float>() { return UG_F32; }
template <> constexpr int dtype_code<double>() { return UG_F64; }
template <> constexpr int dtype_code<__half>() { return UG_F16; }
template <> constexpr int dtype_code<__nv_bfloat16>() { return UG_BF16; }

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

void copy_why(const std::string& why, char* out, int out_len) {
  if (out != nullptr && out_len > 0) std::snprintf(out, static_cast<size_t>(out_len), "%s", why.c_str());
}

}  // namespace

namespace ugraph {

// params.h's contract (common/validate.cpp, as on the CPU), then what this build and the chosen
// strategy can run (ugraph/capability.h).
Verdict check_call(const UgParams* p) {
  if (p == nullptr) return {UG_ERR_INVALID, "params is NULL"};
  Verdict v{UG_OK, ""};
  v.status = validate(*p, Backend::kCuda, &v.why);
  if (v.status != UG_OK) return v;
  if (!compiled(p->strategy, p->dtype)) {
    return {UG_ERR_UNSUPPORTED, std::string(kStrategyNames[p->strategy]) + "/" + kDTypeNames[p->dtype] +
                                    ": strategy/dtype not compiled into this build"};
  }
  if (const UgRule* rule = refusing_rule(*p)) {
    return {UG_ERR_UNSUPPORTED, std::string(kStrategyNames[p->strategy]) + " " + rule->why};
  }
  return v;
}

Verdict enqueue(const UgParams& p, cudaStream_t stream) {
  const int64_t need = ug_cuda_workspace_bytes(&p);
  if (need > 0) {
    if (p.workspace == nullptr || p.workspace_bytes < need) {
      return {UG_ERR_WORKSPACE, "the workspace has " + std::to_string(p.workspace == nullptr ? 0 : p.workspace_bytes) +
                                    " bytes; this call needs " + std::to_string(need)};
    }
    if (reinterpret_cast<uintptr_t>(p.workspace) % alignof(unsigned long long) != 0) {
      return {UG_ERR_INVALID, "the workspace must be 8-byte aligned"};
    }
  }
  // Nothing to write (no output rows, or rows of zero elements): nothing to launch.
  const int64_t out_rows = p.gather_op == UG_GATHER_NONE ? p.num_edges : p.num_dst;
  if (out_rows * p.out_len == 0) return {UG_OK, ""};
  const cudaError_t err = UG_DTYPE_SWITCH(p.dtype, DType, [&] {
    return UG_INDEX_SWITCH(p.index_bits, IdType, [&] { return dispatch<DType, IdType>(p, stream); });
  });
  if (err != cudaSuccess) {
    return {UG_ERR_CUDA, std::string("CUDA error in ") + kStrategyNames[p.strategy] + "/" + kDTypeNames[p.dtype] +
                             ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err)};
  }
  return {UG_OK, ""};
}

void set_last_error(const std::string& why) { g_last_error = why; }

}  // namespace ugraph

extern "C" {

int ug_cuda_check(const UgParams* p, char* why, int why_len) {
  const ugraph::Verdict v = ugraph::check_call(p);
  copy_why(v.why, why, why_len);
  return v.status;
}

int64_t ug_cuda_workspace_bytes(const UgParams* p) {
  if (p == nullptr || p->num_dst <= 0 || p->out_len <= 0) return 0;
  const bool edge_strategy = p->strategy == UG_THREAD_EDGE || p->strategy == UG_WARP_EDGE;
  if (!edge_strategy) return 0;
  const int64_t elements = p->num_dst * p->out_len;
  if (p->gather_op == UG_MAX || p->gather_op == UG_MIN) return elements * int64_t(sizeof(unsigned long long));
  const bool sum = p->gather_op == UG_SUM || p->gather_op == UG_MEAN;
  if (sum && (p->dtype == UG_F16 || p->dtype == UG_BF16)) return elements * int64_t(sizeof(float));
  return 0;
}

int ug_cuda_run(const UgParams* p, void* stream) {
  ugraph::Verdict v = ugraph::check_call(p);
  if (v.status == UG_OK) v = ugraph::enqueue(*p, static_cast<cudaStream_t>(stream));
  if (v.status != UG_OK) g_last_error = v.why;
  return v.status;
}

const char* ug_cuda_source_hash(void) { return UGRAPH_SOURCE_HASH; }

uint32_t ug_cuda_compiled_keys(void) { return kCompiledKeys; }

const char* ug_cuda_build_info(void) {
  return "archs=" UGRAPH_CUDA_ARCHS ";kernels=" UGRAPH_KERNELS ";nvcc=" UGRAPH_NVCC_VERSION;
}

const char* ug_cuda_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
