// Aggregation (gather sum/max/min): C[v] = gather over the in-edges of v of msg(p, .).
//
// Destination-parallel without atomics: the CSC is cut into segments of equal edges-plus-rows
// (partition.h), each thread reduces its segments' rows into local accumulators and stores each
// output element once. Rows cut between segments are reduced into per-segment partials and
// merged, in CSC order, after a barrier.
#ifndef UGRAPH_CPU_AGGREGATE_H_
#define UGRAPH_CPU_AGGREGATE_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "args.h"
#include "functors.h"
#include "message.h"
#include "partition.h"
#include "simd.h"

namespace ugraph {
namespace cpu {

// What aggregation does per output row whatever the edge_op: the reduce zero, stores to C and
// the args, and the merge of partials. Shared by every edge_op's kernel, so it is compiled once
// per dtype, index type and reducer.
template <typename T, typename I, typename Red>
struct RowStore {
  using Acc = typename Scalar<T>::Acc;
  using G = Args<T, I>;
  static constexpr int64_t kBlock = 256;  // elements of a runtime-width accumulator block

  // A partial of one row over all out_len features: the values and, for max/min, the winning
  // positions (-1: none yet).
  struct Partial {
    Acc* val;
    I* win;
  };
  // Segment k's head and tail partials, side by side in two flat arrays.
  struct Partials {
    Acc* val;
    I* win;
    int64_t len;
    Partial at(int64_t k, bool head) const {
      const int64_t off = (2 * k + (head ? 0 : 1)) * len;
      return Partial{val + off, Red::is_cmp ? win + off : nullptr};
    }
  };

  // N is int64_t for a runtime width, or std::integral_constant for a fixed one.
  template <typename N, typename W>
  UG_INLINE static void init(N n, Acc* acc, W* win) {
    const Acc zero = Red::template zero<T>();
    for (int64_t j = 0; j < n; ++j) acc[j] = zero;
    if constexpr (Red::is_cmp)
      for (int64_t j = 0; j < n; ++j) win[j] = W(-1);
  }

  // Writes features [j0, j0 + n) of row v: the values (a mean's divided by the row's degree, at
  // least 1), and for max/min the A and B row ids of the winners at positions base + win (0 where
  // nothing won).
  template <typename N, typename W>
  UG_INLINE static void store(const G& g, int64_t v, int64_t j0, N n, const Acc* acc, const W* win, int64_t base) {
    T* c = g.c + v * g.out_len + j0;
    if constexpr (!Red::is_cmp) {
      if (g.mean) {
        const int64_t degree = int64_t(g.indptr[v + 1]) - int64_t(g.indptr[v]);
        const Acc d = Acc(degree > 1 ? degree : 1);
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) c[j] = Scalar<T>::store(acc[j] / d);
        return;
      }
    }
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) c[j] = Scalar<T>::store(acc[j]);
    if constexpr (Red::is_cmp) {
      if (g.wide_args) {
        store_args<int64_t>(g, reinterpret_cast<int64_t*>(g.arg_a), reinterpret_cast<int64_t*>(g.arg_b), v, j0, n,
                            win, base);
      } else {
        store_args<I>(g, g.arg_a, g.arg_b, v, j0, n, win, base);
      }
    }
  }

  // The winners' operand rows into arg_a and arg_b (each NULL when not wanted), as Out.
  template <typename Out, typename N, typename W>
  UG_INLINE static void store_args(const G& g, Out* arg_a, Out* arg_b, int64_t v, int64_t j0, N n, const W* win,
                                   int64_t base) {
    if (arg_a) {
      Out* arg = arg_a + v * g.out_len + j0;
      for (int64_t j = 0; j < n; ++j) arg[j] = win[j] < 0 ? Out(0) : Out(g.a.id(base + win[j]));
    }
    if (arg_b) {
      Out* arg = arg_b + v * g.out_len + j0;
      for (int64_t j = 0; j < n; ++j) arg[j] = win[j] < 0 ? Out(0) : Out(g.b.id(base + win[j]));
    }
  }

  // After the barrier: segment k finalizes its head row from the earlier segments' tails on
  // that row, in CSC order, and then its own head.
  static void merge_head(const G& g, const Segment* seg, int64_t k, const Partials& parts) {
    const int64_t v = seg[k].v0;
    int64_t first = k;
    while (first > 0 && seg[first - 1].v1 == v) --first;
    Acc acc[kBlock];
    I win[Red::is_cmp ? kBlock : 1];
    for (int64_t j0 = 0; j0 < g.out_len; j0 += kBlock) {
      const int64_t n = g.out_len - j0 < kBlock ? g.out_len - j0 : kBlock;
      init(n, acc, win);
      for (int64_t u = first; u <= k; ++u) {
        if (u < k && !seg[u].has_tail) continue;
        const Partial q = parts.at(u, /*head=*/u == k);
        for (int64_t j = 0; j < n; ++j) {
          if constexpr (Red::is_cmp) Red::Merge(acc[j], win[j], q.val[j0 + j], q.win[j0 + j]);
          else acc[j] += q.val[j0 + j];
        }
      }
      store(g, v, j0, n, acc, win, 0);
    }
  }
};

template <typename T, typename I, typename Op, typename Red, bool Bcast>
struct Aggregate : RowStore<T, I, Red> {
  using Base = RowStore<T, I, Red>;
  using typename Base::Acc;
  using typename Base::G;
  using typename Base::Partial;
  using Base::init;
  using Base::store;
  using Base::kBlock;
  using Msg = Message<T, I, Op, Bcast>;
  // Max/min winners while folding: offsets from the first position of the fold, which fit 32
  // bits because no segment spans 2^31 positions (aggregate() below). Half the width of 64-bit
  // ids, they keep twice as many winners in registers.
  using Win = int32_t;

  // Features are reduced in blocks whose accumulator stays out of memory: fixed widths from
  // eight 256-bit vectors (kWide) halving down to one (kNarrow), which the compiler unrolls
  // into registers, what is left under one vector in one pass (narrow), and blocks of up to
  // kBlock elements of runtime width for the rest (dot, whose messages sum reduce_size
  // products each, and the tails of broadcast kernels). An
  // accumulator in registers more than doubles the gather rate: one in L1 puts a store and a
  // reload between consecutive edges. To bound the build, broadcast kernels (a block inside one
  // broadcast run) and half types (whose conversions are long code) take only kWide, and half
  // types with broadcast none. The fixed widths are compiled only into the x86-64-v3/v4
  // versions: baseline x86-64 has half the registers, and leaving them out halves the build.
  static constexpr bool kHalf = !std::is_same<Acc, T>::value;
  static constexpr bool kFixed = !Op::reduce_last && !(Bcast && kHalf);
  static constexpr int64_t kWide = 256 / sizeof(Acc);
  static constexpr int64_t kNarrow = Bcast || kHalf ? kWide : 32 / sizeof(Acc);
  // Edges of prefetch lead. The lead runs across row ends (up to the segment's last position):
  // with ~20 edges a row, stopping at each row end would leave a row's first edges unfetched.
  // Only when the gathered rows outrun the caches (Args::prefetch).
  static constexpr int64_t kAhead = 32;
  // Broadcast rows narrower than this that are one run take small() with fixed steps.
  static constexpr int64_t kSmallBcast = 32 / sizeof(Acc) + 1;
  // Rows of at most this many elements (without broadcast, or one broadcast run) take
  // rows_small(), with the width resolved once per segment.
  static constexpr int64_t kSmallRow = 8;

  // Folds the messages of positions [pb, pe) for features [j0, j0 + n) into acc/win (winners
  // as offsets from pb), and prefetches ahead up to position `limit`.
  template <typename N>
  UG_INLINE static void fold(const G& g, int64_t pb, int64_t pe, int64_t limit, int64_t j0, N n, Acc* acc,
                             Win* win) {
    for (int64_t p = pb; p < pe; ++p) {
      if (g.prefetch && p + kAhead < limit) Msg::prefetch(g, p + kAhead, j0, n);
      const T* a = Op::use_lhs ? g.a.at(p) : nullptr;
      const T* b = Op::use_rhs ? g.b.at(p) : nullptr;
      const Win pos = Win(p - pb);
      if constexpr (Op::reduce_last) {
        for (int64_t j = 0; j < n; ++j) {
          const Acc m = Msg::dot(a + Msg::run_a(g, j0 + j), b + Msg::run_b(g, j0 + j), g.reduce_size);
          if constexpr (Red::is_cmp) Red::Fold(acc[j], win[j], m, pos); else acc[j] += m;
        }
      } else {
        Msg::runs(g, a, b, j0, n, [&](auto sa, auto sb, int64_t j, auto len, const T* ar, const T* br)
                                      __attribute__((always_inline)) {
          constexpr int SA = decltype(sa)::value, SB = decltype(sb)::value;
          Acc* acc_r = acc + j;
          if constexpr (Red::is_cmp) {
            Win* win_r = win + j;
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) Red::Fold(acc_r[i], win_r[i], Msg::template element<SA, SB>(ar, br, i), pos);
          } else {
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) acc_r[i] += Msg::template element<SA, SB>(ar, br, i);
          }
        });
      }
    }
  }

  // Reduces positions [pb, pe) for one block of features starting at j0: the widest W that
  // fits, halving down to kNarrow, then what is left under one vector in one pass; else a
  // runtime width. The block goes to sink(j0, n, acc, win); returns its width.
  template <bool Wide, int64_t W, typename Sink>
  UG_INLINE static int64_t block(const G& g, int64_t pb, int64_t pe, int64_t limit, int64_t j0, Sink&& sink) {
    const int64_t left = g.out_len - j0;
    if constexpr (Wide && kHeads) {
      if (g.heads && g.run < g.out_len) {
        const int64_t n = g.a_step ? heads_of<1>(g, pb, pe, limit, j0, sink) : heads_of<0>(g, pb, pe, limit, j0, sink);
        if (n) return n;
      }
    }
    if constexpr (Wide && kFixed && W >= kNarrow) {
      if (left >= W) {
        Acc acc[W];
        Win win[Red::is_cmp ? W : 1];
        return reduce(g, pb, pe, limit, j0, std::integral_constant<int64_t, W>{}, acc, win, sink);
      }
      if constexpr (W > kNarrow) return block<Wide, W / 2>(g, pb, pe, limit, j0, sink);
      if constexpr (!Bcast && !kHalf) return small<kNarrow - 1, 1, 1>(g, pb, pe, limit, j0, j0, j0, left, sink);
      if constexpr (!Bcast && !Red::is_cmp) return narrow(g, pb, pe, limit, j0, left, sink);
    }
    if constexpr (Wide && Bcast && !kHalf && !Op::reduce_last) {
      // One broadcast run over the whole (narrow) row, e.g. u_mul_e with one edge weight per
      // head at one head: each operand steps by a constant 0 or 1 from one offset.
      if (j0 == 0 && g.run == g.out_len && g.out_len < kSmallBcast) {
        if (g.a_step && !g.b_step)
          return small<kSmallBcast - 1, 1, 0>(g, pb, pe, limit, g.a_off[0], g.b_off[0], 0, left, sink);
        if (!g.a_step && g.b_step)
          return small<kSmallBcast - 1, 0, 1>(g, pb, pe, limit, g.a_off[0], g.b_off[0], 0, left, sink);
      }
    }
    Acc acc[kBlock];
    Win win[Red::is_cmp ? kBlock : 1];
    return reduce(g, pb, pe, limit, j0, left < kBlock ? left : kBlock, acc, win, sink);
  }

  // GAT's aggregation (Runs::heads): (N, H, D) features times one weight per head and edge
  // (E, H, 1), i.e. H runs of D. Blocks of K whole runs of R elements, K and R fixed at compile
  // time: the K * R accumulators stay in registers and each head's weight is loaded once per
  // edge, where the general broadcast block walks the runs at run time with its accumulators in
  // memory (3-4x slower at 8 heads of 8). Sum with mul only, GAT's forward and the backward to
  // its features: every other combination keeps the general block, to bound the build.
  static constexpr bool kHeads = Bcast && !kHalf && !Red::is_cmp && std::is_same<Op, binary::Mul>::value;

  // The block at j0 (a multiple of run) with SA: whether A is the stepping operand; 0 where
  // run is not one of the compiled lengths.
  template <int SA, typename Sink>
  UG_INLINE static int64_t heads_of(const G& g, int64_t pb, int64_t pe, int64_t limit, int64_t j0, Sink&& sink) {
    switch (g.run) {
      case 2: return heads<kWide / 2, 2, SA>(g, pb, pe, limit, j0, sink);
      case 4: return heads<kWide / 4, 4, SA>(g, pb, pe, limit, j0, sink);
      case 8: return heads<kWide / 8, 8, SA>(g, pb, pe, limit, j0, sink);
      case 16: return heads<kWide / 16, 16, SA>(g, pb, pe, limit, j0, sink);
      default: return 0;
    }
  }

  // K runs while at least K are left, else halving; the row holds whole runs (plan_runs).
  template <int64_t K, int64_t R, int SA, typename Sink>
  UG_INLINE static int64_t heads(const G& g, int64_t pb, int64_t pe, int64_t limit, int64_t j0, Sink&& sink) {
    if constexpr (K > 1) {
      if (g.out_len - j0 < K * R) return heads<K / 2, R, SA>(g, pb, pe, limit, j0, sink);
    }
    using Width = std::integral_constant<int64_t, K * R>;
    Acc acc[K * R];
    Win* no_win = nullptr;
    init(Width{}, acc, no_win);
    // The stepping operand's elements of the block, and the standing one's weights.
    const int64_t s0 = (SA ? g.a_off[0] : g.b_off[0]) + j0, w0 = (SA ? g.b_off[0] : g.a_off[0]) + j0 / R;
    for (int64_t p = pb; p < pe; ++p) {
      if (g.prefetch && p + kAhead < limit) Msg::prefetch(g, p + kAhead, j0, K * R);
      const T* s = (SA ? g.a.at(p) : g.b.at(p)) + s0;
      const T* w = (SA ? g.b.at(p) : g.a.at(p)) + w0;
#pragma GCC unroll 16
      for (int64_t k = 0; k < K; ++k) {
        const Acc wk = Scalar<T>::load(w[k]);
        Acc* acc_k = acc + k * R;
        const T* s_k = s + k * R;
#pragma omp simd
        for (int64_t i = 0; i < R; ++i) {
          const Acc x = Scalar<T>::load(s_k[i]);
          acc_k[i] += SA ? Op::Call(x, wk) : Op::Call(wk, x);
        }
      }
    }
    sink(j0, Width{}, acc, no_win);
    return K * R;
  }

  // Widths under one vector with their width fixed at compile time: n == left, one of
  // [1, N]. Operand A's elements sit at a0 + i * SA of its row, B's at b0 + i * SB (SA, SB 0 or
  // 1), the block's features at [j0, j0 + n). The accumulators stay in registers and the loop
  // over them unrolls, so an edge costs its loads and adds, whatever the width.
  template <int64_t N, int SA, int SB, typename Sink>
  UG_INLINE static int64_t small(const G& g, int64_t pb, int64_t pe, int64_t limit, int64_t a0, int64_t b0,
                                 int64_t j0, int64_t left, Sink&& sink) {
    if constexpr (N > 1) {
      if (left != N) return small<N - 1, SA, SB>(g, pb, pe, limit, a0, b0, j0, left, sink);
    }
    using Width = std::integral_constant<int64_t, N>;
    Acc acc[N];
    Win win[Red::is_cmp ? N : 1];
    init(Width{}, acc, win);
    fold_small<N, SA, SB>(g, pb, pe, limit, a0, b0, j0, acc, win);
    sink(j0, Width{}, acc, win);
    return N;
  }

  // small()'s fold over positions [pb, pe).
  template <int64_t N, int SA, int SB>
  UG_INLINE static void fold_small(const G& g, int64_t pb, int64_t pe, int64_t limit, int64_t a0, int64_t b0,
                                   int64_t j0, Acc* acc, Win* win) {
    for (int64_t p = pb; p < pe; ++p) {
      if (g.prefetch && p + kAhead < limit) Msg::prefetch(g, p + kAhead, j0, N);
      const T* a = Op::use_lhs ? g.a.at(p) + a0 : nullptr;
      const T* b = Op::use_rhs ? g.b.at(p) + b0 : nullptr;
      if constexpr (Red::is_cmp) {
        const Win pos = Win(p - pb);
#pragma GCC unroll 16
        for (int64_t i = 0; i < N; ++i) Red::Fold(acc[i], win[i], Msg::template element<SA, SB>(a, b, i), pos);
      } else if constexpr (N >= 4) {  // whole or masked vectors
#pragma omp simd
        for (int64_t i = 0; i < N; ++i) acc[i] += Msg::template element<SA, SB>(a, b, i);
      } else {  // a few scalars
#pragma GCC unroll 16
        for (int64_t i = 0; i < N; ++i) acc[i] += Msg::template element<SA, SB>(a, b, i);
      }
    }
  }

  // Whole rows [lo, hi) of a narrow row (n == out_len, one of [1, N]) with the width resolved
  // once for them all rather than per row: a row then costs its indptr load and its store.
  template <int64_t N, int SA, int SB>
  UG_INLINE static void rows_small(const G& g, int64_t lo, int64_t hi, int64_t limit, int64_t a0, int64_t b0,
                                   int64_t n) {
    if constexpr (N > 1) {
      if (n != N) return rows_small<N - 1, SA, SB>(g, lo, hi, limit, a0, b0, n);
    }
    using Width = std::integral_constant<int64_t, N>;
    for (int64_t v = lo; v < hi; ++v) {
      const int64_t pb = g.indptr[v], pe = g.indptr[v + 1];
      Acc acc[N];
      Win win[Red::is_cmp ? N : 1];
      init(Width{}, acc, win);
      fold_small<N, SA, SB>(g, pb, pe, limit, a0, b0, 0, acc, win);
      store(g, v, 0, Width{}, acc, win, pb);
    }
  }

  // The rows [lo, hi) by rows_small when the row is narrow (no broadcast, or one broadcast run
  // of fixed steps); false to leave them to block().
  UG_INLINE static bool narrow_rows(const G& g, int64_t lo, int64_t hi, int64_t limit) {
    if constexpr (kHalf || Op::reduce_last) {
      return false;
    } else if constexpr (!Bcast) {
      if (g.out_len > kSmallRow) return false;
      rows_small<kSmallRow, 1, 1>(g, lo, hi, limit, 0, 0, g.out_len);
      return true;
    } else {
      if (g.out_len > kSmallRow || g.run != g.out_len || g.a_step == g.b_step) return false;
      if (g.a_step) rows_small<kSmallRow, 1, 0>(g, lo, hi, limit, g.a_off[0], g.b_off[0], g.out_len);
      else rows_small<kSmallRow, 0, 1>(g, lo, hi, limit, g.a_off[0], g.b_off[0], g.out_len);
      return true;
    }
  }

  // One block of n features (a fixed or a runtime width) in the caller's accumulator.
  template <typename N, typename Sink>
  UG_INLINE static int64_t reduce(const G& g, int64_t pb, int64_t pe, int64_t limit, int64_t j0, N n, Acc* acc,
                                  Win* win, Sink&& sink) {
    init(n, acc, win);
    fold(g, pb, pe, limit, j0, n, acc, win);
    sink(j0, n, acc, win);
    return n;
  }

  // The last `left` < kNarrow features of a sum without broadcast, in one pass over its edges:
  // kNarrow accumulators in registers (the loop over them is unrolled), the ones past `left`
  // skipped by a branch that every edge takes the same way. Halving blocks would gather every
  // source row once per power of two in `left`; a runtime-width block keeps the accumulators
  // in memory. (max/min measured slower this way at 5 features: their compare-and-select
  // does not vectorize around the branch, so they keep the runtime-width block.)
  template <typename Sink>
  UG_INLINE static int64_t narrow(const G& g, int64_t pb, int64_t pe, int64_t limit, int64_t j0, int64_t left,
                                  Sink&& sink) {
    Acc acc[kNarrow];
    Win* no_win = nullptr;
    init(std::integral_constant<int64_t, kNarrow>{}, acc, no_win);
    for (int64_t p = pb; p < pe; ++p) {
      if (g.prefetch && p + kAhead < limit) Msg::prefetch(g, p + kAhead, j0, left);
      const T* a = Op::use_lhs ? g.a.at(p) + j0 : nullptr;
      const T* b = Op::use_rhs ? g.b.at(p) + j0 : nullptr;
#pragma GCC unroll 16
      for (int64_t j = 0; j < kNarrow; ++j) {
        if (j < left) {
          const Acc m = Msg::template element<1, 1>(a, b, j);
          acc[j] += m;
        }
      }
    }
    sink(j0, left, acc, no_win);
    return left;
  }

  // Everything done for a segment before the barrier: each row it holds edges of, in order.
  // Rows it finalizes go straight to C; its first row, when earlier segments hold part of it,
  // goes to the head partial, and its last, when a later segment finalizes it, to the tail.
  // One loop for all three keeps a single copy of the inlined reduction per version.
  template <bool Wide>
  UG_INLINE static void segment_rows(const G& g, const Segment& s, Partial head, Partial tail) {
    const int64_t last = s.has_tail ? s.v1 : s.v1 - 1;
    // Narrow rows: the rows wholly inside the segment ([v0 + has_head, v1)) in one loop of fixed
    // width; the head and tail rows, if any, below.
    int64_t skip_lo = 0, skip_hi = -1;
    if constexpr (Wide) {
      const int64_t lo = s.has_head ? s.v0 + 1 : s.v0;
      if (lo < s.v1 && narrow_rows(g, lo, s.v1, s.p1)) {
        skip_lo = lo;
        skip_hi = s.v1 - 1;
      }
    }
    for (int64_t v = s.v0; v <= last; ++v) {
      if (v == skip_lo && skip_hi >= v) {
        v = skip_hi;
        continue;
      }
      const int64_t pb = v == s.v0 ? s.p0 : int64_t(g.indptr[v]);
      const int64_t pe = v == s.v1 ? s.p1 : int64_t(g.indptr[v + 1]);
      const Partial part = v == s.v1 ? tail : v == s.v0 && s.has_head ? head : Partial{nullptr, nullptr};
      for (int64_t j0 = 0; j0 < g.out_len;) {
        j0 += block<Wide, kWide>(g, pb, pe, s.p1, j0, [&](int64_t jb, auto n, const Acc* acc, const Win* win) {
          if (!part.val) return store(g, v, jb, n, acc, win, pb);
          for (int64_t j = 0; j < n; ++j) part.val[jb + j] = acc[j];
          if constexpr (Red::is_cmp)
            for (int64_t j = 0; j < n; ++j) part.win[jb + j] = win[j] < 0 ? I(-1) : I(pb + win[j]);
        });
      }
    }
  }

  // The versions of segment_rows. float32 and float64 get an x86-64-v4 version: AVX-512's mask
  // registers and 32 vector registers make the max/min update (compare, blend the value, blend
  // the winner) much cheaper, and sums over rows that stay in cache issue half the loads and
  // adds (10-35% faster at 64 features on 5K-20K-node graphs). Half types, which DGL's CPU
  // kernels barely support, are left at v3 to bound the build.
  UG_TARGET_V4 static void segment_v4(const G& g, const Segment& s, Partial head, Partial tail) {
    segment_rows<true>(g, s, head, tail);
  }
  UG_TARGET_V3 static void segment_v3(const G& g, const Segment& s, Partial head, Partial tail) {
    segment_rows<true>(g, s, head, tail);
  }
  static void segment(const G& g, const Segment& s, Partial head, Partial tail) {
    if constexpr (UG_MULTIVERSION) {
      if constexpr (!kHalf) {
        if (isa_level() >= 4) return segment_v4(g, s, head, tail);
      }
      if (isa_level() >= 3) return segment_v3(g, s, head, tail);
      segment_rows<false>(g, s, head, tail);
    } else {
      segment_rows<true>(g, s, head, tail);
    }
  }
};

// Runs one aggregation. Throws std::bad_alloc only before any thread starts.
template <typename T, typename I, typename Op, typename Red, bool Bcast>
void aggregate(const Args<T, I>& g) {
  using K = Aggregate<T, I, Op, Red, Bcast>;
  using Acc = typename K::Acc;
  if (g.out_len == 0 || g.num_dst == 0) return;
  const int threads = threads_for((g.num_edges + g.num_dst) * g.out_len * g.reduce_size);
  // Several segments per thread, handed out dynamically: a thread that the OS or a noisy
  // neighbour holds up then costs the others one segment's wait, not half the work. (Cutting
  // more rows only adds partials of out_len elements each.) And never a segment that spans
  // 2^31 positions (K::Win).
  constexpr int64_t kSegmentsPerThread = 8;
  const int64_t items = g.num_edges + g.num_dst, most_items = INT32_MAX;
  const int64_t wanted = threads > 1 ? threads * kSegmentsPerThread : 1;
  const int64_t segs = items / most_items + 1 > wanted ? items / most_items + 1 : wanted;
  if (segs == 1) {
    K::segment(g, segment_of(g.indptr, g.num_dst, g.num_edges, 0, 1), {}, {});
    return;
  }
  std::vector<Segment> seg(segs);
  std::vector<Acc> val(2 * segs * g.out_len);
  std::vector<I> win(Red::is_cmp ? 2 * segs * g.out_len : 0);
  const typename K::Base::Partials parts{val.data(), win.data(), g.out_len};

#pragma omp parallel num_threads(threads)
  {
    // The implicit barrier after the first loop orders every partial before the merges.
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < segs; ++k) {
      seg[k] = segment_of(g.indptr, g.num_dst, g.num_edges, k, segs);
      K::segment(g, seg[k], parts.at(k, true), parts.at(k, false));
    }
#pragma omp for schedule(static)
    for (int64_t k = 0; k < segs; ++k)
      if (seg[k].has_head) K::Base::merge_head(g, seg.data(), k, parts);
  }
}

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_AGGREGATE_H_
