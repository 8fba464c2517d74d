// Fused edge softmax (softmax.h): one task per run of whole destination rows.
//
// The unfused chain streams every edge tensor four times and allocates three of them; here
// each row's edge rows are gathered once into a per-thread scratch (as DGL's kernel does),
// which stays in L1/L2 for the exp, the sum and the division, and only the result is scattered
// back. In the scratch the exp runs over contiguous elements, so it vectorizes even with one
// element per edge. Rows too long for the scratch take the same operations in place.
// The order per output element is DGL's: max, then exp(x - max) summed in CSC order, then the
// division; nothing is reassociated. The loops over the elements of an edge row are marked simd:
// the compiler cannot tell that the scattered output rows never overlap the rows it reads or
// the scratch, and would otherwise keep them scalar (a scalar division per element was a third
// of the forward's time at 8 heads).
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#include "error.h"
#include "half.h"
#include "partition.h"
#include "simd.h"
#include "ugraph/api.h"
#include "softmax.h"

namespace ugraph {
namespace cpu {
namespace {

// Elements of an edge row reduced together: the max/sum accumulators of a block stay in
// registers or L1, and wider rows (rare: edge_softmax runs on per-head scores) go block by block.
constexpr int64_t kBlock = 64;
// Scratch elements per thread: a row whose edges hold more (edges x block width) than fits
// comfortably in L2 is computed in place instead.
constexpr int64_t kScratch = int64_t(1) << 15;

// exp in float without a call, so that loops over it vectorize (glibc's expf is a call per
// element, which was half of the forward's time at 8 heads): exp(x) = 2^n * exp(r) with
// x = n ln2 + r, |r| <= ln2 / 2, and Cephes' degree-6 polynomial for exp(r). At most 1 ulp from
// the correctly rounded value over the float range; below exp's smallest normal result it gives
// 0 (the softmax sees only x <= 0 there, where those values are far below any sum's ulp); NaN
// stays NaN. Selects are bit masks (half.h), so every operation stays unconditional.
UG_INLINE float exp_of(float x) {
  constexpr float lo = -87.33654475f, hi = 88.72283905f;
  const float xc = float_of_bits(select(x < lo, bits_of_float(lo), select(x > hi, bits_of_float(hi), bits_of_float(x))));
  constexpr float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = xc * 1.44269504088896341f + shifter;
  const float n = t - shifter;
  const float r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const float scaled = y * float_of_bits((bits_of_float(t) - bits_of_float(shifter) + 127u) << 23);
  return float_of_bits(select(x < lo, 0u, select(x != x, bits_of_float(x), bits_of_float(scaled))));
}
// float64 keeps libm's exp, as DGL's kernel calls it: its results stay DGL's, bit for bit.
UG_INLINE double exp_of(double x) { return std::exp(x); }

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

  // Forward over positions [pb, pe), elements [j0, j0 + n). N is int64_t, or an
  // integral_constant for the common head counts, which fixes the inner loops' trip count.
  template <typename N>
  UG_INLINE void forward_block(int64_t pb, int64_t pe, int64_t j0, N n, Acc* buf) const {
    Acc m[kBlock], s[kBlock];
    for (int64_t j = 0; j < n; ++j) {
      m[j] = -std::numeric_limits<Acc>::infinity();
      s[j] = Acc(0);
    }
    const int64_t deg = pe - pb;
    if (buf && deg * n <= kScratch) {
      for (int64_t q = 0; q < deg; ++q) {
        const T* xr = x + row_of(pb + q) + j0;
        Acc* b = buf + q * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) {
          const Acc a = S::load(xr[j]);
          b[j] = a;
          m[j] = m[j] < a ? a : m[j];
        }
      }
      for (int64_t q = 0; q < deg; ++q)
        for (int64_t j = 0; j < n; ++j) buf[q * n + j] = round(buf[q * n + j] - m[j]);
      const int64_t len = deg * n;
#pragma omp simd
      for (int64_t i = 0; i < len; ++i) buf[i] = round(exp_of(buf[i]));
      for (int64_t q = 0; q < deg; ++q)
        for (int64_t j = 0; j < n; ++j) s[j] += buf[q * n + j];
      for (int64_t j = 0; j < n; ++j) s[j] = round(s[j]);
      for (int64_t q = 0; q < deg; ++q) {
        T* o = out + row_of(pb + q) + j0;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) o[j] = S::store(buf[q * n + j] / s[j]);
      }
      return;
    }
    for (int64_t q = pb; q < pe; ++q) {
      const T* xr = x + row_of(q) + j0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const Acc a = S::load(xr[j]);
        m[j] = m[j] < a ? a : m[j];
      }
    }
    for (int64_t q = pb; q < pe; ++q) {
      const int64_t r = row_of(q) + j0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const Acc z = round(exp_of(round(S::load(x[r + j]) - m[j])));
        out[r + j] = S::store(z);
        s[j] += z;
      }
    }
    for (int64_t j = 0; j < n; ++j) s[j] = round(s[j]);
    for (int64_t q = pb; q < pe; ++q) {
      T* o = out + row_of(q) + j0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) o[j] = S::store(S::load(o[j]) / s[j]);
    }
  }

  template <typename N>
  UG_INLINE void backward_block(int64_t pb, int64_t pe, int64_t j0, N n) const {
    Acc s[kBlock];
    for (int64_t j = 0; j < n; ++j) s[j] = Acc(0);
    for (int64_t q = pb; q < pe; ++q) {
      const T* yr = y + row_of(q) + j0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) s[j] += S::load(yr[j]);
    }
    for (int64_t j = 0; j < n; ++j) s[j] = round(s[j]);
    for (int64_t q = pb; q < pe; ++q) {
      const int64_t r = row_of(q) + j0;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) out[r + j] = S::store(S::load(y[r + j]) - round(s[j] * S::load(x[r + j])));
    }
  }

  // Rows [v0, v1), with the row width fixed at compile time where it is a common head count.
  template <bool Backward>
  UG_INLINE void rows(int64_t v0, int64_t v1, Acc* buf) const {
    auto each = [&](auto n) __attribute__((always_inline)) {
      for (int64_t v = v0; v < v1; ++v) {
        if constexpr (Backward) backward_block(indptr[v], indptr[v + 1], 0, n);
        else forward_block(indptr[v], indptr[v + 1], 0, n, buf);
      }
    };
    switch (p.len) {
      case 1: return each(std::integral_constant<int64_t, 1>{});
      case 2: return each(std::integral_constant<int64_t, 2>{});
      case 4: return each(std::integral_constant<int64_t, 4>{});
      case 8: return each(std::integral_constant<int64_t, 8>{});
      default: break;
    }
    for (int64_t v = v0; v < v1; ++v) {
      for (int64_t j0 = 0; j0 < p.len; j0 += kBlock) {
        const int64_t n = p.len - j0 < kBlock ? p.len - j0 : kBlock;
        if constexpr (Backward) backward_block(indptr[v], indptr[v + 1], j0, n);
        else forward_block(indptr[v], indptr[v + 1], j0, n, buf);
      }
    }
  }

  // The versions of rows(): x86-64-v3 runs the exp 8 floats at a time (3x the baseline's rate).
  // The file is built without FMA contraction, so both give the same values, and float64 keeps
  // DGL's (a fused s * x - y would round once where DGL rounds twice).
  template <bool Backward>
  UG_TARGET_V3 void rows_v3(int64_t v0, int64_t v1, Acc* buf) const { rows<Backward>(v0, v1, buf); }
  template <bool Backward>
  void run_rows(int64_t v0, int64_t v1, Acc* buf) const {
    if constexpr (UG_MULTIVERSION)
      if (isa_level() >= 3) return rows_v3<Backward>(v0, v1, buf);
    rows<Backward>(v0, v1, buf);
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

// The calling thread's scratch of kScratch elements, allocated on its first use and kept
// (OpenMP's threads persist, so this happens once per thread); NULL where memory is short, and
// then rows run in place, with the same results.
template <typename Acc>
Acc* thread_scratch() {
  thread_local std::unique_ptr<Acc[]> buf(new (std::nothrow) Acc[kScratch]);
  return buf.get();
}

template <typename T, typename I>
void run(const UgSoftmaxParams& p, bool backward) {
  using K = Softmax<T, I>;
  const K k(p);
  // exp and the division are a few times the work of the other operations on an element.
  const int threads = threads_for((backward ? 2 : 6) * p.num_edges * p.len + p.num_dst);
  // Several tasks per thread, handed out dynamically, so a skewed row or a busy core costs one
  // task's wait.
  const int64_t tasks = threads > 1 ? int64_t(threads) * 8 : 1;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t v0 = first_row(k.indptr, p.num_dst, p.num_edges, t, tasks);
    const int64_t v1 = first_row(k.indptr, p.num_dst, p.num_edges, t + 1, tasks);
    if (backward) k.template run_rows<true>(v0, v1, nullptr);
    else k.template run_rows<false>(v0, v1, thread_scratch<typename K::Acc>());
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
