// From a validated UgParams to one compiled kernel: the typed Args, and the switch over index
// width, edge_op and broadcast that picks the template instance of a gather kind and dtype.
#ifndef UGRAPH_CPU_DISPATCH_H_
#define UGRAPH_CPU_DISPATCH_H_

#include <cstdint>
#include <type_traits>

#include "args.h"
#include "broadcast.h"
#include "functors.h"
#include "half.h"
#include "memory.h"
#include "ugraph/params.h"

namespace ugraph {
namespace cpu {

// A validated UgParams with its broadcast resolved: when bcast, every operand the edge_op reads
// has an offset table (a NULL one in the params replaced by an identity table); otherwise
// output element j addresses A and B at j directly.
struct Prepared {
  const UgParams* p;
  bool bcast;
  const int64_t* a_off;
  const int64_t* b_off;
  Runs runs;
};

template <typename T, typename I>
Args<T, I> make_args(const Prepared& q) {
  const UgParams& p = *q.p;
  const I* col = static_cast<const I*>(p.col);
  const I* row = static_cast<const I*>(p.row);
  const I* eid = static_cast<const I*>(p.eid);
  auto index = [&](int type) { return type == UG_SRC ? col : type == UG_DST ? row : eid; };
  Args<T, I> g;
  g.num_dst = p.num_dst;
  g.num_edges = p.num_edges;
  g.indptr = static_cast<const I*>(p.indptr);
  g.a = Operand<T, I>{static_cast<const T*>(p.a), p.a_row_stride, p.a_len * p.reduce_size, index(p.a_type)};
  g.b = Operand<T, I>{static_cast<const T*>(p.b), p.b_row_stride, p.b_len * p.reduce_size, index(p.b_type)};
  g.out_index = eid;
  g.c = static_cast<T*>(p.c);
  g.arg_a = static_cast<I*>(p.arg_a);
  g.arg_b = static_cast<I*>(p.arg_b);
  g.wide_args = sizeof(I) == 4 && p.arg_bits == 64;
  g.out_len = p.out_len;
  g.reduce_size = p.reduce_size;
  g.mean = p.gather_op == UG_MEAN;
  g.a_off = q.a_off;
  g.b_off = q.b_off;
  g.run = q.runs.run;
  g.a_step = q.runs.a_step;
  g.b_step = q.runs.b_step;
  g.heads = q.runs.heads;
  g.prefetch = gathered_bytes(p) > 4 * l2_cache_bytes();
  return g;
}

template <typename T>
struct Tag {
  using type = T;
};

// Calls fn(Tag<I>{}, Tag<Op>{}, std::bool_constant<Bcast>{}) for q's case, whose dtype is T.
template <typename T, typename Fn>
void dispatch_typed(const Prepared& q, Fn&& fn) {
  const UgParams& p = *q.p;
  auto with_bcast = [&](auto i, auto op) {
    if (q.bcast) fn(i, op, std::true_type{}); else fn(i, op, std::false_type{});
  };
  auto with_op = [&](auto i) {
    switch (p.edge_op) {
      case UG_COPY_LHS: return with_bcast(i, Tag<binary::CopyLhs>{});
      case UG_COPY_RHS: return with_bcast(i, Tag<binary::CopyRhs>{});
      case UG_ADD: return with_bcast(i, Tag<binary::Add>{});
      case UG_SUB: return with_bcast(i, Tag<binary::Sub>{});
      case UG_MUL: return with_bcast(i, Tag<binary::Mul>{});
      case UG_DIV: return with_bcast(i, Tag<binary::Div>{});
      default: return with_bcast(i, Tag<binary::Dot>{});
    }
  };
  if (p.index_bits == 32) with_op(Tag<int32_t>{}); else with_op(Tag<int64_t>{});
}

enum class Gather { kNone, kSum, kMax, kMin };

// The kernels of one gather kind at one dtype. CMakeLists.txt generates one file per pair from
// instance.cpp.in, so the template instances build in parallel. They may throw std::bad_alloc
// before any thread starts.
template <Gather G, typename T>
void run_instance(const Prepared& q);

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_DISPATCH_H_
