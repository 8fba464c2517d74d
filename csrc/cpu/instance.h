// The definition of run_instance: one gather kind at one dtype, over every index width, edge_op
// and broadcast (a binary max or min broadcast only). Only the generated instance files
// (CMakeLists.txt, instance.cpp.in) include it.
#ifndef UGRAPH_CPU_INSTANCE_H_
#define UGRAPH_CPU_INSTANCE_H_

#include <cstdlib>

#include "aggregate.h"
#include "create.h"
#include "dispatch.h"

namespace ugraph {
namespace cpu {

template <Gather G>
struct ReduceOf;
template <>
struct ReduceOf<Gather::kSum> { using type = reduce::Sum; };
template <>
struct ReduceOf<Gather::kMax> { using type = reduce::Max; };
template <>
struct ReduceOf<Gather::kMin> { using type = reduce::Min; };

template <Gather G, typename T>
void run_instance(const Prepared& q) {
  dispatch_typed<T>(q, [&](auto i, auto op, auto bcast) {
    using I = typename decltype(i)::type;
    using Op = typename decltype(op)::type;
    if constexpr (G == Gather::kNone) {
      create<T, I, Op, decltype(bcast)::value>(make_args<T, I>(q));
    } else if constexpr ((G == Gather::kMax || G == Gather::kMin) && Op::use_lhs && Op::use_rhs &&
                         !decltype(bcast)::value) {
      std::abort();  // not compiled: run() sends a binary max or min through the broadcast kernels
    } else {
      aggregate<T, I, Op, typename ReduceOf<G>::type, decltype(bcast)::value>(make_args<T, I>(q));
    }
  });
}

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_INSTANCE_H_
