// Fused edge softmax (ugraph/softmax.h): one task per run of whole destination rows.
//
// Each row's edges are visited three times (max; exp and sum; divide) for the forward and twice
// for the backward, but the row's edge rows stay in L1/L2 between visits, so memory sees each
// element about once, where the unfused chain streams every edge tensor four times and
// allocates three of them. The order per output element is DGL's: max, then exp(x - max) summed
// in CSC order, then the division; no reassociation, and this file is built for baseline x86-64
// only (no FMA to contract s * x into), so float32 and float64 reproduce DGL's values.
#include <cmath>
#include <cstdint>
#include <limits>

#include "error.h"
#include "half.h"
#include "partition.h"
#include "simd.h"
#include "ugraph/api.h"
#include "ugraph/softmax.h"

namespace ugraph {
namespace cpu {
namespace {

// Elements of a row reduced together: the max/sum accumulators of a block stay in L1 while the
// row's edges are visited, and wider rows (rare: edge_softmax runs on per-head scores) are
// done block after block.
constexpr int64_t kBlock = 64;

template <typename T, typename I>
struct Softmax {
  using S = Scalar<T>;
  using Acc = typename S::Acc;

  const UgSoftmaxParams& p;
  const I* indptr;
  const I* eid;
  const T* x;
  const T* y;
  T* out;

  explicit Softmax(const UgSoftmaxParams& q)
      : p(q), indptr(static_cast<const I*>(q.indptr)), eid(static_cast<const I*>(q.eid)),
        x(static_cast<const T*>(q.x)), y(static_cast<const T*>(q.y)), out(static_cast<T*>(q.out)) {}

  // A value as T holds it: every intermediate of DGL's kernels lives in its element type.
  UG_INLINE static Acc round(Acc v) { return S::load(S::store(v)); }
  UG_INLINE int64_t row_of(int64_t pos) const { return (eid ? int64_t(eid[pos]) : pos) * p.len; }

  void forward(int64_t v0, int64_t v1) const {
    Acc m[kBlock], s[kBlock];
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t pb = indptr[v], pe = indptr[v + 1];
      for (int64_t j0 = 0; j0 < p.len; j0 += kBlock) {
        const int64_t n = p.len - j0 < kBlock ? p.len - j0 : kBlock;
        for (int64_t j = 0; j < n; ++j) {
          m[j] = -std::numeric_limits<Acc>::infinity();
          s[j] = Acc(0);
        }
        for (int64_t q = pb; q < pe; ++q) {
          const T* xr = x + row_of(q) + j0;
          for (int64_t j = 0; j < n; ++j) {
            const Acc a = S::load(xr[j]);
            m[j] = m[j] < a ? a : m[j];
          }
        }
        for (int64_t q = pb; q < pe; ++q) {
          const int64_t r = row_of(q) + j0;
          for (int64_t j = 0; j < n; ++j) {
            const T z = S::store(std::exp(round(S::load(x[r + j]) - m[j])));
            out[r + j] = z;
            s[j] += S::load(z);
          }
        }
        for (int64_t j = 0; j < n; ++j) s[j] = round(s[j]);
        for (int64_t q = pb; q < pe; ++q) {
          T* o = out + row_of(q) + j0;
          for (int64_t j = 0; j < n; ++j) o[j] = S::store(S::load(o[j]) / s[j]);
        }
      }
    }
  }

  void backward(int64_t v0, int64_t v1) const {
    Acc s[kBlock];
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t pb = indptr[v], pe = indptr[v + 1];
      for (int64_t j0 = 0; j0 < p.len; j0 += kBlock) {
        const int64_t n = p.len - j0 < kBlock ? p.len - j0 : kBlock;
        for (int64_t j = 0; j < n; ++j) s[j] = Acc(0);
        for (int64_t q = pb; q < pe; ++q) {
          const T* yr = y + row_of(q) + j0;
          for (int64_t j = 0; j < n; ++j) s[j] += S::load(yr[j]);
        }
        for (int64_t j = 0; j < n; ++j) s[j] = round(s[j]);
        for (int64_t q = pb; q < pe; ++q) {
          const int64_t r = row_of(q) + j0;
          for (int64_t j = 0; j < n; ++j)
            out[r + j] = S::store(S::load(y[r + j]) - round(s[j] * S::load(x[r + j])));
        }
      }
    }
  }
};

// The first row of task k of `tasks`: tasks hold equal shares of edges plus rows (partition.h),
// moved forward to the next row start, since a row's reductions run in one task.
template <typename I>
int64_t first_row(const I* indptr, int64_t num_dst, int64_t num_edges, int64_t k, int64_t tasks) {
  int64_t v, pos;
  path_point(indptr, num_dst, (num_edges + num_dst) * k / tasks, &v, &pos);
  return pos > int64_t(indptr[v]) ? v + 1 : v;
}

template <typename T, typename I>
void run(const UgSoftmaxParams& p, bool backward) {
  const Softmax<T, I> k(p);
  // exp is about ten times the work of the other operations on an element.
  const int threads = threads_for((backward ? 2 : 12) * p.num_edges * p.len + p.num_dst);
  // Several tasks per thread, handed out dynamically, so a skewed row or a busy core costs one
  // task's wait.
  const int64_t tasks = threads > 1 ? int64_t(threads) * 8 : 1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t v0 = first_row(k.indptr, p.num_dst, p.num_edges, t, tasks);
    const int64_t v1 = first_row(k.indptr, p.num_dst, p.num_edges, t + 1, tasks);
    if (backward) k.backward(v0, v1); else k.forward(v0, v1);
  }
}

template <typename I>
int check_indptr(const UgSoftmaxParams& p) {
  const I* indptr = static_cast<const I*>(p.indptr);
  if (indptr[0] != 0 || int64_t(indptr[p.num_dst]) != p.num_edges)
    return fail(UG_ERR_INVALID, "indptr must run from 0 to num_edges=%lld, got %lld..%lld",
                (long long)p.num_edges, (long long)indptr[0], (long long)indptr[p.num_dst]);
  for (int64_t v = 0; v < p.num_dst; ++v)
    if (indptr[v + 1] < indptr[v]) return fail(UG_ERR_INVALID, "indptr decreases at row %lld", (long long)v);
  return UG_OK;
}

// Checks every field the kernels read (indptr in O(V), as the core's validate() does; eid is
// not scanned).
int check(const UgSoftmaxParams* p, bool backward) {
  if (!p) return fail(UG_ERR_INVALID, "params is NULL");
  if (p->index_bits != 32 && p->index_bits != 64)
    return fail(UG_ERR_INVALID, "index_bits must be 32 or 64, got %d", p->index_bits);
  if (p->num_dst < 0 || p->num_edges < 0 || p->len < 0)
    return fail(UG_ERR_INVALID, "negative size (num_dst=%lld, num_edges=%lld, len=%lld)", (long long)p->num_dst,
                (long long)p->num_edges, (long long)p->len);
  if (p->index_bits == 32 && p->num_edges > INT32_MAX)
    return fail(UG_ERR_INVALID, "num_edges=%lld does not fit 32-bit indices", (long long)p->num_edges);
  if (p->dtype < UG_F32 || p->dtype > UG_BF16) return fail(UG_ERR_INVALID, "unknown dtype %d", p->dtype);
  if (!p->indptr) return fail(UG_ERR_INVALID, "indptr is NULL");
  if (p->num_edges > 0 && p->len > 0 && (!p->x || !p->out || (backward && !p->y)))
    return fail(UG_ERR_INVALID, "x, out%s must be set when there are elements", backward ? " and y" : "");
  return p->index_bits == 32 ? check_indptr<int32_t>(*p) : check_indptr<int64_t>(*p);
}

int entry(const UgSoftmaxParams* p, bool backward) {
  clear_error();
  const int status = check(p, backward);
  if (status != UG_OK || p->num_edges == 0 || p->len == 0) return status;
  auto with_index = [&](auto t) {
    using T = decltype(t);
    if (p->index_bits == 32) run<T, int32_t>(*p, backward); else run<T, int64_t>(*p, backward);
  };
  switch (p->dtype) {
    case UG_F32: with_index(float{}); break;
    case UG_F64: with_index(double{}); break;
    case UG_F16: with_index(Half{}); break;
    default: with_index(BFloat16{}); break;
  }
  return UG_OK;
}

}  // namespace
}  // namespace cpu
}  // namespace ugraph

extern "C" int ug_cpu_edge_softmax_forward(const UgSoftmaxParams* p) { return ugraph::cpu::entry(p, false); }
extern "C" int ug_cpu_edge_softmax_backward(const UgSoftmaxParams* p) { return ugraph::cpu::entry(p, true); }
