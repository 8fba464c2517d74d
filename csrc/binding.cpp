// The Python face of the core: a params object filled from Python, and run functions that
// take it. No tensors cross this boundary, only addresses, so no libtorch is linked.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/validate.h"
#include "forest.h"
#include "cpu/softmax.h"
#ifdef UGRAPH_WITH_CUDA
#include "cuda/softmax.h"
#endif
#include "ugraph/api.h"
#include "ugraph/capability.h"

namespace py = pybind11;

namespace {

template <typename T>
void def_ptr(py::class_<UgParams>& cls, const char* name, T* UgParams::*member) {
  cls.def_property(
      name, [member](const UgParams& p) { return reinterpret_cast<uintptr_t>(p.*member); },
      [member](UgParams& p, uintptr_t v) { p.*member = reinterpret_cast<T*>(v); });
}

UgSoftmaxParams softmax_params(int64_t num_dst, int64_t num_edges, int32_t index_bits, uintptr_t indptr,
                               uintptr_t eid, int32_t dtype, int64_t len, uintptr_t x, uintptr_t y, uintptr_t out) {
  return UgSoftmaxParams{num_dst, num_edges, index_bits, reinterpret_cast<const void*>(indptr),
                         reinterpret_cast<const void*>(eid), dtype, len, reinterpret_cast<const void*>(x),
                         reinterpret_cast<const void*>(y), reinterpret_cast<void*>(out)};
}

void raise_on(int status, const char* what, const char* detail) {
  if (status == UG_OK) return;
  std::string msg = std::string(what) + " failed (status " + std::to_string(status) + "): " + detail;
  if (status == UG_ERR_INVALID) throw py::value_error(msg);
  if (status == UG_ERR_UNSUPPORTED) throw py::type_error(msg);
  throw std::runtime_error(msg);
}

template <size_t N>
py::list names(const char* const (&all)[N], uint32_t mask = ~uint32_t(0)) {
  py::list out;
  for (size_t i = 0; i < N; ++i)
    if (mask & ugraph::bit(static_cast<int>(i))) out.append(all[i]);
  return out;
}

// ugraph/capability.h as data: the enums' names, the rules, and what this build compiled.
py::dict capabilities() {
  py::dict caps;
  caps["strategies"] = names(ugraph::kStrategyNames);
  caps["dtypes"] = names(ugraph::kDTypeNames);
  caps["gather_ops"] = names(ugraph::kGatherNames);
  py::list rules;
  for (const UgRule& r : ugraph::kRules) {
    py::dict rule;
    rule["strategies"] = names(ugraph::kStrategyNames, r.strategies);
    rule["gather_ops"] = names(ugraph::kGatherNames, r.gather_ops);
    rule["dtypes"] = names(ugraph::kDTypeNames, r.dtypes);
    rule["min_edges"] = r.min_edges;
    rule["only_deterministic"] = bool(r.only_deterministic);
    rule["why"] = r.why;
    rules.append(rule);
  }
  caps["rules"] = rules;
  py::list compiled;
#ifdef UGRAPH_WITH_CUDA
  const uint32_t keys = ug_cuda_compiled_keys();
  for (int s = 0; s < ugraph::kNumStrategies; ++s)
    for (int d = 0; d < ugraph::kNumDTypes; ++d)
      if (keys & ugraph::bit(s * ugraph::kNumDTypes + d))
        compiled.append(py::make_tuple(ugraph::kStrategyNames[s], ugraph::kDTypeNames[d]));
#endif
  caps["compiled"] = compiled;
  return caps;
}

// Params(**fields) fills every field in one call: the DGL layer builds one per kernel call, and
// thirty attribute writes through pybind11 cost more than a small kernel.
using Setter = void (*)(UgParams&, py::handle);
template <typename T, T UgParams::*M>
void set_value(UgParams& p, py::handle v) { p.*M = v.cast<T>(); }
template <typename T, T* UgParams::*M>
void set_pointer(UgParams& p, py::handle v) { p.*M = reinterpret_cast<T*>(v.cast<uintptr_t>()); }

const std::unordered_map<std::string, Setter>& setters() {
#define UG_V(f) {#f, &set_value<decltype(UgParams::f), &UgParams::f>}
#define UG_P(f, T) {#f, &set_pointer<T, &UgParams::f>}
  static const std::unordered_map<std::string, Setter> all = {
      UG_V(num_src), UG_V(num_dst), UG_V(num_edges), UG_V(index_bits), UG_V(max_degree), UG_V(num_long_rows),
      UG_V(edge_op), UG_V(gather_op), UG_V(a_type), UG_V(b_type), UG_V(c_type), UG_V(dtype), UG_V(a_row_stride),
      UG_V(b_row_stride), UG_V(out_len), UG_V(a_len), UG_V(b_len), UG_V(reduce_size), UG_V(strategy),
      UG_V(grouping), UG_V(tiling), UG_V(workspace_bytes), UG_V(workspace_zeroed), UG_V(b_off_block),
      UG_V(arg_bits),
      UG_P(indptr, const void), UG_P(long_rows, const void), UG_P(col, const void), UG_P(row, const void),
      UG_P(eid, const void),
      UG_P(a, const void), UG_P(b, const void), UG_P(c, void), UG_P(arg_a, void), UG_P(arg_b, void),
      UG_P(a_off, const int64_t), UG_P(b_off, const int64_t), UG_P(workspace, void)};
#undef UG_V
#undef UG_P
  return all;
}

void assign(UgParams& p, const py::kwargs& fields) {
  for (const auto& item : fields) {
    const std::string name = item.first.cast<std::string>();
    const auto it = setters().find(name);
    if (it == setters().end()) throw py::type_error("Params has no field " + name);
    it->second(p, item.second);
  }
}

// A copy of p with one call's addresses: a repeat call of one signature (core.ops.Plan) changes
// only its data.
UgParams with_data(const UgParams& p, uintptr_t a, int64_t a_row_stride, uintptr_t b, int64_t b_row_stride,
                   uintptr_t c, uintptr_t arg_a, uintptr_t arg_b, uintptr_t workspace) {
  UgParams q = p;
  q.a = reinterpret_cast<const void*>(a);
  q.a_row_stride = a_row_stride;
  q.b = reinterpret_cast<const void*>(b);
  q.b_row_stride = b_row_stride;
  q.c = reinterpret_cast<void*>(c);
  q.arg_a = reinterpret_cast<void*>(arg_a);
  q.arg_b = reinterpret_cast<void*>(arg_b);
  q.workspace = reinterpret_cast<void*>(workspace);
  return q;
}

UgParams make_params(const py::kwargs& fields) {
  UgParams p{};
  assign(p, fields);
  return p;
}

// The repeat call of a Plan (core/ops.py) as plain METH_FASTCALL functions, not pybind11 ones:
// on a small graph the whole call is a few microseconds of host time, and pybind11's argument
// casters for ten arguments cost about 0.3 of them (0.45 against 0.17 us on the development
// machine), a params object from with_data and a second call to run it more (run_cpu_with with
// its kernel on a 5-node graph 1.03 us, with_data then run_cpu 1.73 on the 2-core CPU machine).
// with_data_args: params and this call's data (a, a_row_stride, b, b_row_stride, c, arg_a, arg_b,
// workspace) as the params' copy with these addresses in *q; false with a Python error set.
bool with_data_args(PyObject* params, PyObject* const* data, UgParams* q) {
  const UgParams& p = py::cast<const UgParams&>(py::handle(params));
  // a, b, c, arg_a, arg_b, workspace; the two row strides apart.
  constexpr int kAddress[] = {0, 2, 4, 5, 6, 7};
  uintptr_t address[6];
  for (int i = 0; i < 6; ++i) address[i] = static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(data[kAddress[i]]));
  const int64_t a_stride = PyLong_AsLongLong(data[1]);
  const int64_t b_stride = PyLong_AsLongLong(data[3]);
  if (PyErr_Occurred()) return false;  // a non-integer or a negative address
  *q = with_data(p, address[0], a_stride, address[1], b_stride, address[2], address[3], address[4], address[5]);
  return true;
}

// The call's C++ exceptions as Python ones, for the fast calls (pybind11 translates its own).
template <typename F>
PyObject* fast_call(F&& body) {
  try {
    if (!body()) return nullptr;
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (py::cast_error& e) {  // the first argument is no Params
    PyErr_SetString(PyExc_TypeError, e.what());
    return nullptr;
  } catch (py::builtin_exception& e) {  // raise_on's ValueError and TypeError
    e.set_error();
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// run_cpu_with(params, a, a_row_stride, b, b_row_stride, c, arg_a, arg_b, workspace):
// run_cpu(params.with_data(...)), the GIL released while the kernel runs.
PyObject* run_cpu_with(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 9) {
    PyErr_Format(PyExc_TypeError, "run_cpu_with takes 9 arguments (%zd given)", nargs);
    return nullptr;
  }
  return fast_call([&] {
    UgParams q;
    if (!with_data_args(args[0], args + 1, &q)) return false;
    int status;
    {
      py::gil_scoped_release nogil;
      status = ug_cpu_run(&q);
    }
    raise_on(status, "ug_cpu_run", ug_cpu_last_error());
    return true;
  });
}

#ifdef UGRAPH_WITH_CUDA
// run_cuda_with(params, stream, a, a_row_stride, b, b_row_stride, c, arg_a, arg_b, workspace):
// run_cuda(params.with_data(...), stream).
PyObject* run_cuda_with(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 10) {
    PyErr_Format(PyExc_TypeError, "run_cuda_with takes 10 arguments (%zd given)", nargs);
    return nullptr;
  }
  return fast_call([&] {
    const uintptr_t stream = static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(args[1]));
    if (PyErr_Occurred()) return false;
    UgParams q;
    if (!with_data_args(args[0], args + 2, &q)) return false;
    const int status = ug_cuda_run(&q, reinterpret_cast<void*>(stream));
    raise_on(status, "ug_cuda_run", status == UG_OK ? "" : ug_cuda_last_error());
    return true;
  });
}
#endif

PyMethodDef kFastCalls[] = {
    {"run_cpu_with", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&run_cpu_with)), METH_FASTCALL,
     "run_cpu_with(params, a, a_row_stride, b, b_row_stride, c, arg_a, arg_b, workspace)"},
#ifdef UGRAPH_WITH_CUDA
    {"run_cuda_with", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&run_cuda_with)), METH_FASTCALL,
     "run_cuda_with(params, stream, a, a_row_stride, b, b_row_stride, c, arg_a, arg_b, workspace)"},
#endif
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "dgl_ugraph compiled core: the unified graph operator on CPU and CUDA";

  py::class_<UgParams> params(m, "Params");
  params.def(py::init(&make_params));
  // A copy with some fields changed by name: the timing runner's configurations of one call.
  params.def("replace", [](const UgParams& p, const py::kwargs& fields) {
    UgParams q = p;
    assign(q, fields);
    return q;
  });
  // A copy with this call's addresses: a repeat call of one signature (core.ops.Plan) changes
  // only its data. Positional, as keyword arguments cost a dict and a name lookup per field,
  // which on a small graph is a sizeable part of the call.
  params.def("with_data", &with_data);
#define UG_FIELD(name) params.def_readwrite(#name, &UgParams::name)
  UG_FIELD(num_src); UG_FIELD(num_dst); UG_FIELD(num_edges); UG_FIELD(index_bits); UG_FIELD(max_degree);
  UG_FIELD(num_long_rows);
  UG_FIELD(edge_op); UG_FIELD(gather_op); UG_FIELD(a_type); UG_FIELD(b_type); UG_FIELD(c_type);
  UG_FIELD(dtype); UG_FIELD(a_row_stride); UG_FIELD(b_row_stride);
  UG_FIELD(out_len); UG_FIELD(a_len); UG_FIELD(b_len); UG_FIELD(reduce_size);
  UG_FIELD(strategy); UG_FIELD(grouping); UG_FIELD(tiling); UG_FIELD(workspace_bytes); UG_FIELD(workspace_zeroed);
  UG_FIELD(b_off_block); UG_FIELD(arg_bits);
#undef UG_FIELD
  def_ptr(params, "indptr", &UgParams::indptr);
  def_ptr(params, "long_rows", &UgParams::long_rows);
  def_ptr(params, "col", &UgParams::col);
  def_ptr(params, "row", &UgParams::row);
  def_ptr(params, "eid", &UgParams::eid);
  def_ptr(params, "a", &UgParams::a);
  def_ptr(params, "b", &UgParams::b);
  def_ptr(params, "c", &UgParams::c);
  def_ptr(params, "arg_a", &UgParams::arg_a);
  def_ptr(params, "arg_b", &UgParams::arg_b);
  def_ptr(params, "a_off", &UgParams::a_off);
  def_ptr(params, "b_off", &UgParams::b_off);
  def_ptr(params, "workspace", &UgParams::workspace);

  // The validator both cores run (common/validate.h), for tests that hold them to one answer.
  // "cpu" also reads indptr and the broadcast offsets, so they must be host memory.
  m.def("validate", [](const UgParams& p, const std::string& backend) {
    if (backend != "cpu" && backend != "cuda") throw py::value_error("backend must be 'cpu' or 'cuda'");
    std::string why;
    const int status = ugraph::validate(p, backend == "cpu" ? ugraph::Backend::kCpu : ugraph::Backend::kCuda, &why);
    return py::make_tuple(status, why);
  });
  m.def("capabilities", &capabilities);

  m.def("run_cpu", [](const UgParams& p) {
    int status;
    {
      py::gil_scoped_release nogil;
      status = ug_cpu_run(&p);
    }
    raise_on(status, "ug_cpu_run", ug_cpu_last_error());
  });
  // run_cpu_with, and run_cuda_with where CUDA is compiled: a Plan's repeat call.
  if (PyModule_AddFunctions(m.ptr(), kFastCalls) != 0) throw py::error_already_set();

  // The fused CPU edge softmax (csrc/cpu/softmax.h); x, y and out are addresses.
  m.def("edge_softmax_cpu", [](bool backward, int64_t num_dst, int64_t num_edges, int32_t index_bits,
                               uintptr_t indptr, uintptr_t eid, int32_t dtype, int64_t len, uintptr_t x,
                               uintptr_t y, uintptr_t out) {
    const UgSoftmaxParams p = softmax_params(num_dst, num_edges, index_bits, indptr, eid, dtype, len, x, y, out);
    int status;
    {
      py::gil_scoped_release nogil;
      status = backward ? ug_cpu_edge_softmax_backward(&p) : ug_cpu_edge_softmax_forward(&p);
    }
    raise_on(status, "ug_cpu_edge_softmax", ug_cpu_last_error());
  });

#ifdef UGRAPH_WITH_CUDA
  // The same on CUDA (csrc/cuda/softmax.h), queued on `stream`; every address is device memory.
  // max_degree, long_rows, num_long_rows: the graph's long rows (UgSoftmaxRows); edge_dst and stats:
  // the softmax split in two launches (UgSoftmaxSplit), or 0 for one launch.
  m.def("edge_softmax_cuda", [](bool backward, int64_t num_dst, int64_t num_edges, int32_t index_bits,
                                uintptr_t indptr, uintptr_t eid, int32_t dtype, int64_t len, uintptr_t x,
                                uintptr_t y, uintptr_t out, int64_t max_degree, uintptr_t long_rows,
                                int64_t num_long_rows, uintptr_t edge_dst, uintptr_t stats, uintptr_t stream) {
    const UgSoftmaxParams p = softmax_params(num_dst, num_edges, index_bits, indptr, eid, dtype, len, x, y, out);
    const UgSoftmaxRows rows{max_degree, reinterpret_cast<const void*>(long_rows), num_long_rows};
    const UgSoftmaxSplit split{reinterpret_cast<const void*>(edge_dst), reinterpret_cast<void*>(stats)};
    const UgSoftmaxSplit* how = edge_dst ? &split : nullptr;
    void* s = reinterpret_cast<void*>(stream);
    const int status = backward ? ug_cuda_edge_softmax_backward(&p, &rows, how, s)
                                : ug_cuda_edge_softmax_forward(&p, &rows, how, s);
    raise_on(status, "ug_cuda_edge_softmax", status == UG_OK ? "" : ug_cuda_last_error());
  });
  m.def("run_cuda", [](const UgParams& p, uintptr_t stream) {
    int status = ug_cuda_run(&p, reinterpret_cast<void*>(stream));
    raise_on(status, "ug_cuda_run", status == UG_OK ? "" : ug_cuda_last_error());
  });
  m.def("cuda_workspace_bytes", [](const UgParams& p) { return ug_cuda_workspace_bytes(&p); });
  m.def("cuda_check", [](const UgParams& p) {
    char why[512] = {0};
    int status = ug_cuda_check(&p, why, sizeof(why));
    return py::make_tuple(status, std::string(why));
  });
  // The core's timing loop (ug_cuda_time): configurations of one call as params objects, and the
  // launches of each. Answers (status, message, failed, ms, starved): each launch's milliseconds,
  // config-major, where status is UG_OK; otherwise the reason, and in `failed` the position of the
  // configuration that was refused or failed to queue (-1 when the stream itself failed).
  m.def("cuda_time", [](const std::vector<UgParams>& ps, const std::vector<int32_t>& runs, uintptr_t stream,
                        float gate_timeout_ms) {
    if (ps.size() != runs.size()) throw py::value_error("cuda_time: one run count per params");
    int64_t total = 0;
    for (int32_t r : runs) total += r > 0 ? r : 0;
    std::vector<float> ms(static_cast<size_t>(total));
    int32_t starved = 0, failed = -1, status;
    {
      py::gil_scoped_release nogil;
      status = ug_cuda_time(ps.data(), runs.data(), static_cast<int32_t>(ps.size()), reinterpret_cast<void*>(stream),
                            gate_timeout_ms, ms.data(), &starved, &failed);
    }
    const std::string why = status == UG_OK ? "" : ug_cuda_last_error();
    return py::make_tuple(status, why, failed, ms, starved != 0);
  });
#endif

  // The strategy predictor's tree evaluator (dgl_ugraph/predictor.py): the flattened forest's
  // arrays and a (rows, features) float64 matrix in, one raw score per row out.
  m.def("forest_predict", [](py::array_t<int32_t, py::array::c_style | py::array::forcecast> feature,
                             py::array_t<double, py::array::c_style | py::array::forcecast> threshold,
                             py::array_t<int32_t, py::array::c_style | py::array::forcecast> left,
                             py::array_t<int32_t, py::array::c_style | py::array::forcecast> right,
                             py::array_t<uint8_t, py::array::c_style | py::array::forcecast> flags,
                             py::array_t<double, py::array::c_style | py::array::forcecast> leaf_value,
                             py::array_t<int32_t, py::array::c_style | py::array::forcecast> roots,
                             py::array_t<double, py::array::c_style | py::array::forcecast> x) {
    const int64_t n = feature.size();
    if (threshold.size() != n || left.size() != n || right.size() != n || flags.size() != n)
      throw py::value_error("forest: node arrays differ in length");
    if (x.ndim() != 2) throw py::value_error("forest: x must be a (rows, features) matrix");
    ugraph::ForestView f{feature.data(), threshold.data(), left.data(), right.data(), flags.data(), n,
                         leaf_value.data(), leaf_value.size(), roots.data(), roots.size()};
    py::array_t<double> out(x.shape(0));
    ugraph::forest_predict(f, x.data(), x.shape(0), x.shape(1), out.mutable_data());
    return out;
  });

  m.def("build_info", []() {
    py::dict info;
    info["cpu"] = true;
    info["cxx_compiler"] = UGRAPH_CXX_COMPILER;
#ifdef UGRAPH_WITH_CUDA
    info["cuda"] = true;
    info["cuda_source_hash"] = std::string(ug_cuda_source_hash());
    info["cuda_build"] = std::string(ug_cuda_build_info());
#else
    info["cuda"] = false;
#endif
    return info;
  });
}
