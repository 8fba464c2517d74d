#include "create.h"

#include "dispatch.h"

namespace ugraph {
namespace cpu {

void run_create(const Prepared& q) {
  dispatch(q, [&](auto t, auto i, auto op, auto bcast) {
    using T = typename decltype(t)::type;
    using I = typename decltype(i)::type;
    create<T, I, typename decltype(op)::type, decltype(bcast)::value>(make_args<T, I>(q));
  });
}

}  // namespace cpu
}  // namespace ugraph
