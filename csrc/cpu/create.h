// Message creation (gather none): C[eid(p)] = msg(p, .) for every position p.
//
// Edge-parallel: each thread takes a contiguous run of positions, so reads of dst-typed rows
// stream in CSC order and only src/edge rows are gathered (and prefetched). Every output row
// is written by exactly one position, so no thread ever shares an output element.
#ifndef UGRAPH_CPU_CREATE_H_
#define UGRAPH_CPU_CREATE_H_

#include <cstdint>

#include "args.h"
#include "message.h"
#include "partition.h"
#include "simd.h"

namespace ugraph {
namespace cpu {

template <typename T, typename I, typename Op, bool Bcast>
struct Create {
  using Msg = Message<T, I, Op, Bcast>;
  using G = Args<T, I>;

  static constexpr int64_t kAhead = 16;  // edges of prefetch lead

  // Messages of positions [pb, pe), one thread's share.
  UG_INLINE static void positions_impl(const G& g, int64_t pb, int64_t pe) {
    const int64_t n = g.out_len;
    for (int64_t p = pb; p < pe; ++p) {
      if (g.prefetch && p + kAhead < pe) Msg::prefetch(g, p + kAhead, 0, n);
      const T* a = Op::use_lhs ? g.a.at(p) : nullptr;
      const T* b = Op::use_rhs ? g.b.at(p) : nullptr;
      T* c = g.c + (g.out_index ? int64_t(g.out_index[p]) : p) * n;
      if constexpr (Op::reduce_last) {
        for (int64_t j = 0; j < n; ++j)
          c[j] = Scalar<T>::store(Msg::dot(a + Msg::run_a(g, j), b + Msg::run_b(g, j), g.reduce_size));
      } else {
        Msg::runs(g, a, b, 0, n, [&](auto sa, auto sb, int64_t j, auto len, const T* ar, const T* br)
                                     __attribute__((always_inline)) {
          constexpr int SA = decltype(sa)::value, SB = decltype(sb)::value;
          T* c_r = c + j;
#pragma omp simd
          for (int64_t i = 0; i < len; ++i) c_r[i] = Scalar<T>::store(Msg::template element<SA, SB>(ar, br, i));
        });
      }
    }
  }

  UG_TARGET_V3 static void positions_v3(const G& g, int64_t pb, int64_t pe) { positions_impl(g, pb, pe); }
  static void positions(const G& g, int64_t pb, int64_t pe) {
    if (isa_level() >= 3) positions_v3(g, pb, pe); else positions_impl(g, pb, pe);
  }
};

template <typename T, typename I, typename Op, bool Bcast>
void create(const Args<T, I>& g) {
  using K = Create<T, I, Op, Bcast>;
  if (g.out_len == 0 || g.num_edges == 0) return;
  const int most = threads_for(g.num_edges * g.out_len * g.reduce_size);
  if (most == 1) {
    K::positions(g, 0, g.num_edges);
    return;
  }
  // Several runs of positions per thread, handed out dynamically, so that a thread held up by
  // the OS or a noisy neighbour costs the others one run's wait, not half the work.
  constexpr int64_t kRunsPerThread = 8;
  const int64_t runs = most * kRunsPerThread;
#pragma omp parallel for num_threads(most) schedule(dynamic, 1)
  for (int64_t r = 0; r < runs; ++r) K::positions(g, g.num_edges * r / runs, g.num_edges * (r + 1) / runs);
}

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_CREATE_H_
