// Aggregation (gather sum/max/min): C[v] = gather over the in-edges of v of msg(p, .).
//
// Destination-parallel without atomics: each thread owns whole output rows (partition.h), folds
// their messages into an accumulator block that stays in L1, and stores each output element
// once. Rows cut between threads are folded into per-thread partials and merged after a
// barrier. Features are walked in blocks of kBlock so the accumulator never leaves L1, whatever
// out_len; within a block the fold over features is one simd loop.
#ifndef UGRAPH_CPU_AGGREGATE_H_
#define UGRAPH_CPU_AGGREGATE_H_

#include <omp.h>

#include <cstdint>
#include <vector>

#include "args.h"
#include "functors.h"
#include "message.h"
#include "partition.h"
#include "simd.h"

namespace ugraph {
namespace cpu {

template <typename T, typename I, typename Op, typename Red, bool Bcast>
struct Aggregate {
  using Acc = typename Scalar<T>::Acc;
  using Msg = Message<T, I, Op, Bcast>;
  using G = Args<T, I>;

  static constexpr int64_t kBlock = 256;  // accumulator elements: 1-2 KiB, plus the winners
  static constexpr int64_t kAhead = 8;    // edges of prefetch lead

  // A partial of one row over all out_len features: the values and, for max/min, the winning
  // positions (-1: none yet).
  struct Partial {
    Acc* val;
    I* win;
  };
  // Thread t's head and tail partials, side by side in two flat arrays.
  struct Partials {
    Acc* val;
    I* win;
    int64_t len;
    Partial at(int t, bool head) const {
      const int64_t off = (2 * int64_t(t) + (head ? 0 : 1)) * len;
      return Partial{val + off, Red::is_cmp ? win + off : nullptr};
    }
  };

  static void init(int64_t n, Acc* acc, I* win) {
    const Acc zero = Red::template zero<T>();
    for (int64_t j = 0; j < n; ++j) acc[j] = zero;
    if constexpr (Red::is_cmp)
      for (int64_t j = 0; j < n; ++j) win[j] = I(-1);
  }

  // Folds the messages of positions [pb, pe) for features [j0, j0 + n) into acc/win.
  static void fold(const G& g, int64_t pb, int64_t pe, int64_t j0, int64_t n, Acc* acc, I* win) {
    const int64_t* aoff = Bcast ? g.a_off + j0 : nullptr;
    const int64_t* boff = Bcast ? g.b_off + j0 : nullptr;
    for (int64_t p = pb; p < pe; ++p) {
      if (p + kAhead < pe) Msg::prefetch(g, p + kAhead, j0, n);
      const T* a = Op::use_lhs ? g.a.at(p) : nullptr;
      const T* b = Op::use_rhs ? g.b.at(p) : nullptr;
      const I pos = I(p);
      if constexpr (Op::reduce_last) {
        for (int64_t j = 0; j < n; ++j) {
          const Acc m = Msg::dot(a + Msg::run_a(g, j0 + j), b + Msg::run_b(g, j0 + j), g.reduce_size);
          if constexpr (Red::is_cmp) Red::Fold(acc[j], win[j], m, pos); else acc[j] += m;
        }
      } else {
        if (!Bcast) {
          if (Op::use_lhs) a += j0;
          if (Op::use_rhs) b += j0;
        }
        if constexpr (Red::is_cmp) {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) Red::Fold(acc[j], win[j], Msg::element(a, b, aoff, boff, j), pos);
        } else {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) acc[j] += Msg::element(a, b, aoff, boff, j);
        }
      }
    }
  }

  // Writes features [j0, j0 + n) of row v: the values, and for max/min the winners' A and B
  // row ids (0 where nothing won).
  static void store(const G& g, int64_t v, int64_t j0, int64_t n, const Acc* acc, const I* win) {
    T* c = g.c + v * g.out_len + j0;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) c[j] = Scalar<T>::store(acc[j]);
    if constexpr (Red::is_cmp) {
      if (g.arg_a) {
        I* arg = g.arg_a + v * g.out_len + j0;
        for (int64_t j = 0; j < n; ++j) arg[j] = win[j] < 0 ? I(0) : I(g.a.id(win[j]));
      }
      if (g.arg_b) {
        I* arg = g.arg_b + v * g.out_len + j0;
        for (int64_t j = 0; j < n; ++j) arg[j] = win[j] < 0 ? I(0) : I(g.b.id(win[j]));
      }
    }
  }

  static void rows(const G& g, int64_t vb, int64_t ve) {
    Acc acc[kBlock];
    I win[Red::is_cmp ? kBlock : 1];
    for (int64_t v = vb; v < ve; ++v) {
      const int64_t pb = g.indptr[v], pe = g.indptr[v + 1];
      for (int64_t j0 = 0; j0 < g.out_len; j0 += kBlock) {
        const int64_t n = g.out_len - j0 < kBlock ? g.out_len - j0 : kBlock;
        init(n, acc, win);
        fold(g, pb, pe, j0, n, acc, win);
        store(g, v, j0, n, acc, win);
      }
    }
  }

  static void partial(const G& g, int64_t pb, int64_t pe, Partial part) {
    for (int64_t j0 = 0; j0 < g.out_len; j0 += kBlock) {
      const int64_t n = g.out_len - j0 < kBlock ? g.out_len - j0 : kBlock;
      I* win = Red::is_cmp ? part.win + j0 : nullptr;
      init(n, part.val + j0, win);
      fold(g, pb, pe, j0, n, part.val + j0, win);
    }
  }

  // Everything thread t does before the barrier: its head partial, its whole rows, its tail.
  UG_CLONES static void segment(const G& g, const Segment& s, Partial head, Partial tail) {
    if (s.v0 < s.v1) {
      int64_t v = s.v0;
      if (s.has_head) {
        partial(g, s.p0, g.indptr[v + 1], head);
        ++v;
      }
      rows(g, v, s.v1);
    }
    if (s.has_tail) partial(g, s.tail_begin, s.p1, tail);
  }

  // After the barrier: thread t finalizes its head row from the earlier threads' tails on that
  // row, in thread order, and then its own head.
  static void merge_head(const G& g, const Segment* seg, int t, const Partials& parts) {
    const int64_t v = seg[t].v0;
    int first = t;
    while (first > 0 && seg[first - 1].v1 == v) --first;
    Acc acc[kBlock];
    I win[Red::is_cmp ? kBlock : 1];
    for (int64_t j0 = 0; j0 < g.out_len; j0 += kBlock) {
      const int64_t n = g.out_len - j0 < kBlock ? g.out_len - j0 : kBlock;
      init(n, acc, win);
      for (int u = first; u <= t; ++u) {
        if (u < t && !seg[u].has_tail) continue;
        const Partial q = parts.at(u, /*head=*/u == t);
        for (int64_t j = 0; j < n; ++j) {
          if constexpr (Red::is_cmp) Red::Merge(acc[j], win[j], q.val[j0 + j], q.win[j0 + j]);
          else acc[j] += q.val[j0 + j];
        }
      }
      store(g, v, j0, n, acc, win);
    }
  }
};

// Runs one aggregation. Throws std::bad_alloc only before any thread starts.
template <typename T, typename I, typename Op, typename Red, bool Bcast>
void aggregate(const Args<T, I>& g) {
  using K = Aggregate<T, I, Op, Red, Bcast>;
  using Acc = typename K::Acc;
  if (g.out_len == 0 || g.num_dst == 0) return;
  const int most = threads_for((g.num_edges + g.num_dst) * g.out_len * g.reduce_size);
  if (most == 1) {
    K::segment(g, segment_of(g.indptr, g.num_dst, g.num_edges, 0, 1), {}, {});
    return;
  }
  std::vector<Segment> seg(most);
  std::vector<Acc> val(2 * most * g.out_len);
  std::vector<I> win(Red::is_cmp ? 2 * most * g.out_len : 0);
  const typename K::Partials parts{val.data(), win.data(), g.out_len};

#pragma omp parallel num_threads(most)
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    // Each thread plans its own segment; the merge reads the neighbours' plans after a barrier.
    seg[t] = segment_of(g.indptr, g.num_dst, g.num_edges, t, threads);
    K::segment(g, seg[t], parts.at(t, true), parts.at(t, false));
#pragma omp barrier
    if (seg[t].has_head) K::merge_head(g, seg.data(), t, parts);
  }
}

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_AGGREGATE_H_
