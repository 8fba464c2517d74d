#include "validate.h"

#include <cstdarg>
#include <cstdint>
#include <cstdio>

namespace ugraph {
namespace {

bool uses_lhs(int edge_op) { return edge_op != UG_COPY_RHS; }
bool uses_rhs(int edge_op) { return edge_op != UG_COPY_LHS; }

int invalid(std::string* why, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
int invalid(std::string* why, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  *why = buf;
  return UG_ERR_INVALID;
}

int64_t rows_of(const UgParams& p, int type) {
  return type == UG_SRC ? p.num_src : type == UG_DST ? p.num_dst : type == UG_EDGE ? p.num_edges : 0;
}

template <typename I>
int check_indptr(const UgParams& p, std::string* why) {
  const I* indptr = static_cast<const I*>(p.indptr);
  if (indptr[0] != 0 || int64_t(indptr[p.num_dst]) != p.num_edges)
    return invalid(why, "indptr must run from 0 to num_edges=%lld, got %lld..%lld", (long long)p.num_edges,
                   (long long)indptr[0], (long long)indptr[p.num_dst]);
  // Only aggregation partitions work by indptr; message creation never reads it.
  if (p.gather_op == UG_GATHER_NONE) return UG_OK;
  for (int64_t v = 0; v < p.num_dst; ++v)
    if (indptr[v + 1] < indptr[v]) return invalid(why, "indptr decreases at row %lld", (long long)v);
  return UG_OK;
}

int check_operand(const UgParams& p, Backend backend, char side, int type, const void* data, int64_t row_stride,
                  int64_t len, const int64_t* off, std::string* why) {
  if (type != UG_SRC && type != UG_DST && type != UG_EDGE)
    return invalid(why, "%c is read by edge_op %d but its type is %d (need src, dst or edge)", side, p.edge_op, type);
  // A tensor with no rows may have no storage (torch gives it a NULL pointer); no edge reads it.
  if (!data && rows_of(p, type) > 0)
    return invalid(why, "%c is read by edge_op %d but its pointer is NULL", side, p.edge_op);
  if (row_stride < 0) return invalid(why, "%c_row_stride is negative", side);
  if (len < 1) return invalid(why, "%c_len must be >= 1, got %lld", side, (long long)len);
  if (!off) {
    if (len != p.out_len)
      return invalid(why, "%c_off is NULL (identity) but %c_len=%lld != out_len=%lld", side, side, (long long)len,
                     (long long)p.out_len);
    return UG_OK;
  }
  if (backend != Backend::kCpu) return UG_OK;
  for (int64_t j = 0; j < p.out_len; ++j)
    if (off[j] < 0 || off[j] >= len)
      return invalid(why, "%c_off[%lld]=%lld is outside [0, %c_len=%lld)", side, (long long)j, (long long)off[j],
                     side, (long long)len);
  return UG_OK;
}

int check_parallel_info(const UgParams& p, std::string* why) {
  if (p.strategy < UG_THREAD_VERTEX || p.strategy > UG_WARP_EDGE)
    return invalid(why, "strategy %d is not a UgStrategy", p.strategy);
  const int g = p.grouping;
  if (g < 1 || g > 64 || (g & (g - 1)) != 0)
    return invalid(why, "grouping must be a power of two in 1..64, got %d", g);
  if (p.tiling < 1 || p.tiling > 64) return invalid(why, "tiling must be in 1..64, got %d", p.tiling);
  if (p.workspace_zeroed != 0 && p.workspace_zeroed != 1)
    return invalid(why, "workspace_zeroed must be 0 or 1, got %d", p.workspace_zeroed);
  return UG_OK;
}

}  // namespace

int validate(const UgParams& p, Backend backend, std::string* why) {
  if (p.index_bits != 32 && p.index_bits != 64)
    return invalid(why, "index_bits must be 32 or 64, got %d", p.index_bits);
  if (p.num_src < 0 || p.num_dst < 0 || p.num_edges < 0)
    return invalid(why, "negative graph size (num_src=%lld, num_dst=%lld, num_edges=%lld)", (long long)p.num_src,
                   (long long)p.num_dst, (long long)p.num_edges);
  if (p.index_bits == 32 && (p.num_src > INT32_MAX || p.num_dst > INT32_MAX || p.num_edges > INT32_MAX))
    return invalid(why, "a graph of %lld+%lld nodes and %lld edges does not fit 32-bit indices", (long long)p.num_src,
                   (long long)p.num_dst, (long long)p.num_edges);
  if (!p.indptr) return invalid(why, "indptr is NULL");
  if (p.max_degree < 0 || p.max_degree > p.num_edges)
    return invalid(why, "max_degree=%lld is outside [0, num_edges=%lld]", (long long)p.max_degree,
                   (long long)p.num_edges);
  if (p.num_long_rows < 0 || p.num_long_rows > p.num_dst)
    return invalid(why, "num_long_rows=%lld is outside [0, num_dst=%lld]", (long long)p.num_long_rows,
                   (long long)p.num_dst);
  if (p.num_long_rows > 0 && !p.long_rows) return invalid(why, "long_rows is NULL with num_long_rows > 0");
  if (p.num_edges > 0 && (!p.col || !p.row)) return invalid(why, "col and row must be set when num_edges > 0");
  if (p.edge_op < UG_COPY_LHS || p.edge_op > UG_DOT) return invalid(why, "unknown edge_op %d", p.edge_op);
  if (p.gather_op < UG_GATHER_NONE || p.gather_op > UG_MEAN) return invalid(why, "unknown gather_op %d", p.gather_op);
  if (p.dtype < UG_F32 || p.dtype > UG_BF16) return invalid(why, "unknown dtype %d", p.dtype);
  if (backend == Backend::kCuda) {
    const int status = check_parallel_info(p, why);
    if (status != UG_OK) return status;
  }

  const int want_c = p.gather_op == UG_GATHER_NONE ? UG_EDGE : UG_DST;
  if (p.c_type != want_c)
    return invalid(why, "gather_op %d writes a %s tensor, but c_type is %d", p.gather_op,
                   want_c == UG_EDGE ? "edge" : "dst", p.c_type);
  if (p.out_len < 0) return invalid(why, "out_len is negative");
  if (p.reduce_size < 1) return invalid(why, "reduce_size must be >= 1, got %lld", (long long)p.reduce_size);
  if (p.reduce_size > 1 && p.edge_op != UG_DOT)
    return invalid(why, "reduce_size=%lld > 1 is only meaningful for dot", (long long)p.reduce_size);
  if (!p.c && rows_of(p, p.c_type) * p.out_len > 0) return invalid(why, "c is NULL");

  const bool cmp = p.gather_op == UG_MAX || p.gather_op == UG_MIN;
  if (p.arg_a && !(cmp && uses_lhs(p.edge_op)))
    return invalid(why, "arg_a is set, but only max/min over an op that reads A writes it");
  if (p.arg_b && !(cmp && uses_rhs(p.edge_op)))
    return invalid(why, "arg_b is set, but only max/min over an op that reads B writes it");
  if (p.arg_bits != 0 && p.arg_bits != p.index_bits && p.arg_bits != 64)
    return invalid(why, "arg_bits must be 0, index_bits (%d) or 64, got %d", p.index_bits, p.arg_bits);

  if (p.b_off_block < 0 || (p.b_off_block & (p.b_off_block - 1)) != 0)
    return invalid(why, "b_off_block must be 0 or a power of two, got %lld", (long long)p.b_off_block);
  if (p.b_off_block > 1 && uses_rhs(p.edge_op) && !p.b_off)
    return invalid(why, "b_off_block=%lld promises blocks of equal offsets, but b_off is NULL (identity)",
                   (long long)p.b_off_block);
  int status = UG_OK;
  if (uses_lhs(p.edge_op)) status = check_operand(p, backend, 'a', p.a_type, p.a, p.a_row_stride, p.a_len, p.a_off, why);
  if (status == UG_OK && uses_rhs(p.edge_op))
    status = check_operand(p, backend, 'b', p.b_type, p.b, p.b_row_stride, p.b_len, p.b_off, why);
  if (status != UG_OK || backend != Backend::kCpu) return status;
  if (uses_rhs(p.edge_op) && p.b_off_block > 1) {
    for (int64_t j = 0; j < p.out_len; ++j)
      if (p.b_off[j] != p.b_off[j - j % p.b_off_block])
        return invalid(why, "b_off[%lld]=%lld breaks b_off_block=%lld: its block starts with %lld", (long long)j,
                       (long long)p.b_off[j], (long long)p.b_off_block, (long long)p.b_off[j - j % p.b_off_block]);
  }
  return p.index_bits == 32 ? check_indptr<int32_t>(p, why) : check_indptr<int64_t>(p, why);
}

}  // namespace ugraph
