// The backend's C entry point: validate, resolve broadcast, dispatch on the gather kind and dtype.
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "dispatch.h"
#include "error.h"
#include "memory.h"
#include "ugraph/api.h"
#include "common/validate.h"

namespace ugraph {
namespace cpu {
namespace {

template <Gather G>
void run_typed(const Prepared& q) {
  switch (q.p->dtype) {
    case UG_F32: return run_instance<G, float>(q);
    case UG_F64: return run_instance<G, double>(q);
    case UG_F16: return run_instance<G, Half>(q);
    default: return run_instance<G, BFloat16>(q);
  }
}

int run(const UgParams& p) {
  const bool lhs = p.edge_op != UG_COPY_RHS, rhs = p.edge_op != UG_COPY_LHS;
  Prepared q{&p, (lhs && p.a_off) || (rhs && p.b_off), p.a_off, p.b_off, Runs{}};
  // Max and min have plain kernels for the copies alone (GIN's and SAGE-pool's aggregations): a
  // binary edge_op reads its operands through identity tables, one run of out_len, in the
  // broadcast kernels. No model issues those, and their plain instances were a third of the
  // CPU core's compile time (run_instance compiles none).
  if ((p.gather_op == UG_MAX || p.gather_op == UG_MIN) && lhs && rhs) q.bcast = true;
  // Broadcasting one side only: the other side still needs a table in the broadcast kernel.
  std::vector<int64_t> identity;
  if (q.bcast && ((lhs && !q.a_off) || (rhs && !q.b_off))) {
    identity.resize(p.out_len);
    for (int64_t j = 0; j < p.out_len; ++j) identity[j] = j;
    if (!q.a_off) q.a_off = identity.data();
    if (!q.b_off) q.b_off = identity.data();
  }
  if (q.bcast) q.runs = plan_runs(lhs ? q.a_off : nullptr, rhs ? q.b_off : nullptr, p.out_len);
  const int64_t elements = (p.gather_op == UG_GATHER_NONE ? p.num_edges : p.num_dst) * p.out_len;
  advise_huge_pages(p.c, elements * (p.dtype == UG_F64 ? 8 : p.dtype == UG_F32 ? 4 : 2));
  const int arg_bytes = (p.arg_bits ? p.arg_bits : p.index_bits) / 8;
  advise_huge_pages(p.arg_a, elements * arg_bytes);
  advise_huge_pages(p.arg_b, elements * arg_bytes);
  switch (p.gather_op) {
    case UG_GATHER_NONE: run_typed<Gather::kNone>(q); break;
    case UG_SUM:
    case UG_MEAN: run_typed<Gather::kSum>(q); break;  // a mean divides at the store (Args::mean)
    case UG_MAX: run_typed<Gather::kMax>(q); break;
    default: run_typed<Gather::kMin>(q); break;
  }
  return UG_OK;
}

}  // namespace
}  // namespace cpu
}  // namespace ugraph

extern "C" int ug_cpu_run(const UgParams* p) {
  using namespace ugraph::cpu;
  clear_error();
  if (!p) return fail(UG_ERR_INVALID, "params is NULL");
  std::string why;
  const int status = ugraph::validate(*p, ugraph::Backend::kCpu, &why);
  if (status != UG_OK) return fail(status, "%s", why.c_str());
  try {
    return run(*p);
  } catch (const std::bad_alloc&) {
    // params.h has no out-of-memory status; the scratch is O(threads * out_len), so this means
    // the host is out of memory, which "cannot run it" describes best.
    return fail(UG_ERR_UNSUPPORTED, "out of host memory for the kernel's scratch buffers");
  }
}
