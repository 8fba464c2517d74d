// Message creation (gather none): C[eid(p)] = msg(p, .) for every position p.
//
// Edge-parallel: each thread takes a contiguous run of positions, so reads of dst-typed rows
// stream in CSC order and only src/edge rows are gathered (and prefetched). Every output row
// is written by exactly one position, so no thread ever shares an output element.
#ifndef UGRAPH_CPU_CREATE_H_
#define UGRAPH_CPU_CREATE_H_

#include <cstdint>
#include <type_traits>

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
  static constexpr int64_t kSmall = 8;   // widest message (or dot run) of a fixed width
  static constexpr bool kHalf = !std::is_same<typename Msg::Acc, T>::value;

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

  // Narrow messages (issue 19: GAT's one-head u_add_v, u_dot_v over a few features) with their
  // width fixed at compile time, so an edge costs its loads, its arithmetic and one store
  // instead of a loop's setup: n == N elements, A's at a0 + i * SA of its row, B's at b0 + i * SB.
  template <int64_t N, int SA, int SB>
  UG_INLINE static void small(const G& g, int64_t pb, int64_t pe, int64_t n, int64_t a0, int64_t b0) {
    if constexpr (N > 1) {
      if (n != N) return small<N - 1, SA, SB>(g, pb, pe, n, a0, b0);
    }
    for (int64_t p = pb; p < pe; ++p) {
      if (g.prefetch && p + kAhead < pe) Msg::prefetch(g, p + kAhead, 0, N);
      const T* a = Op::use_lhs ? g.a.at(p) + a0 : nullptr;
      const T* b = Op::use_rhs ? g.b.at(p) + b0 : nullptr;
      T* c = g.c + (g.out_index ? int64_t(g.out_index[p]) : p) * N;
      // All loads before the stores: C may alias A or B as far as the compiler knows, and
      // interleaved stores would keep it from packing the N elements into one vector.
      T m[N];
#pragma GCC unroll 16
      for (int64_t i = 0; i < N; ++i) m[i] = Scalar<T>::store(Msg::template element<SA, SB>(a, b, i));
#pragma GCC unroll 16
      for (int64_t i = 0; i < N; ++i) c[i] = m[i];
    }
  }

  // Dot messages of K products each, K fixed at compile time (K == k, one of [1, K]): the K
  // products of a message unroll into a few multiply-adds instead of a simd reduction loop of
  // runtime length, whose setup and horizontal sum cost more than the products at K < 16.
  template <int64_t K>
  UG_INLINE static void small_dot(const G& g, int64_t pb, int64_t pe, int64_t k) {
    if constexpr (K > 1) {
      if (k != K) return small_dot<K - 1>(g, pb, pe, k);
    }
    const int64_t n = g.out_len;
    for (int64_t p = pb; p < pe; ++p) {
      if (g.prefetch && p + kAhead < pe) Msg::prefetch(g, p + kAhead, 0, n);
      const T* a = g.a.at(p);
      const T* b = g.b.at(p);
      T* c = g.c + (g.out_index ? int64_t(g.out_index[p]) : p) * n;
      if (n == 1) {  // one head: a single message, no loop
        c[0] = Scalar<T>::store(dot_fixed<K>(a + Msg::run_a(g, 0), b + Msg::run_b(g, 0)));
        continue;
      }
      for (int64_t j = 0; j < n; ++j) c[j] = Scalar<T>::store(dot_fixed<K>(a + Msg::run_a(g, j), b + Msg::run_b(g, j)));
    }
  }

  template <int64_t K>
  UG_INLINE static typename Msg::Acc dot_fixed(const T* a, const T* b) {
    typename Msg::Acc s = 0;  // as DGL: 0 + a product of -0 is +0
#pragma GCC unroll 16
    for (int64_t i = 0; i < K; ++i) s += Op::Call(Scalar<T>::load(a[i]), Scalar<T>::load(b[i]));
    return s;
  }

  // The narrow cases above, or false for positions_impl. Only in the x86-64-v3/v4 versions.
  UG_INLINE static bool narrow(const G& g, int64_t pb, int64_t pe) {
    if constexpr (kHalf) {
      return false;  // half types (whose conversions are long code) keep one loop, to bound the build
    } else if constexpr (Op::reduce_last) {
      if (g.reduce_size > kSmall) return false;
      small_dot<kSmall>(g, pb, pe, g.reduce_size);
      return true;
    } else if constexpr (!Bcast) {
      if (g.out_len > kSmall) return false;
      small<kSmall, 1, 1>(g, pb, pe, g.out_len, 0, 0);
      return true;
    } else {
      // One broadcast run over the whole row: each operand steps by a constant 0 or 1.
      if (g.out_len > kSmall || g.run != g.out_len || g.a_step == g.b_step) return false;
      if (g.a_step) small<kSmall, 1, 0>(g, pb, pe, g.out_len, g.a_off[0], g.b_off[0]);
      else small<kSmall, 0, 1>(g, pb, pe, g.out_len, g.a_off[0], g.b_off[0]);
      return true;
    }
  }

  UG_TARGET_V4 static void positions_v4(const G& g, int64_t pb, int64_t pe) {
    if (!narrow(g, pb, pe)) positions_impl(g, pb, pe);
  }
  UG_TARGET_V3 static void positions_v3(const G& g, int64_t pb, int64_t pe) {
    if (!narrow(g, pb, pe)) positions_impl(g, pb, pe);
  }
  static void positions(const G& g, int64_t pb, int64_t pe) {
    if constexpr (UG_MULTIVERSION && !kHalf) {
      if (isa_level() >= 4) return positions_v4(g, pb, pe);
    }
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
