// ug_cuda_time: the timing loop of the collector and the autotuner, in C, so that timing a
// configuration costs a launch and an event record instead of a trip through Python.
//
// A batch of launches is queued behind a gate: a one-thread kernel that spins on a flag in
// mapped host memory, which the host raises once every launch and event of the batch is queued.
// The GPU therefore never waits on the host between two timed launches, however slow the host
// is, and no guess of the host's queueing time (a spin of fixed length) is needed. The gate gives
// up after a timeout, so that a batch longer than the launch queue cannot deadlock: the host
// blocks in a launch once the queue is full, and the batch is then reported as starved.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "entry.h"
#include "ugraph/api.h"

namespace {

__global__ void gate_kernel(const volatile int32_t* open, uint64_t timeout_ns, volatile int32_t* timed_out) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*open == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(2000);
  }
}

// Per device and host thread: events are bound to the device they were made on, and a gate's
// flags must not be shared by two batches in flight.
struct Timer {
  std::vector<cudaEvent_t> events;
  int32_t* flags = nullptr;  // [0]: open, [1]: timed out; pinned and mapped
  int32_t* flags_dev = nullptr;
};

thread_local std::unordered_map<int, Timer> g_timers;

cudaError_t timer_for(Timer** out) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  Timer& t = g_timers[device];
  if (t.flags == nullptr) {
    void* host = nullptr;
    err = cudaHostAlloc(&host, 2 * sizeof(int32_t), cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess) return err;
    void* dev = nullptr;
    err = cudaHostGetDevicePointer(&dev, host, 0);
    if (err != cudaSuccess) {
      cudaFreeHost(host);
      return err;
    }
    t.flags = static_cast<int32_t*>(host);
    t.flags_dev = static_cast<int32_t*>(dev);
  }
  *out = &t;
  return cudaSuccess;
}

cudaError_t ensure_events(Timer& t, size_t n) {
  while (t.events.size() < n) {
    cudaEvent_t e;
    const cudaError_t err = cudaEventCreate(&e);
    if (err != cudaSuccess) return err;
    t.events.push_back(e);
  }
  return cudaSuccess;
}

void open_gate(Timer& t) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *static_cast<volatile int32_t*>(t.flags) = 1;
}

int fail(int status, const std::string& why) {
  ugraph::set_last_error(why);
  return status;
}

std::string cuda_why(const char* what, cudaError_t err) {
  return std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
}

}  // namespace

extern "C" {

int ug_cuda_time(const UgParams* ps, const int32_t* runs, int32_t n, void* stream, float gate_timeout_ms,
                 float* ms, int32_t* starved, int32_t* failed) {
  if (failed != nullptr) *failed = -1;
  if (starved != nullptr) *starved = 0;
  if (n < 0 || (n > 0 && (ps == nullptr || runs == nullptr || ms == nullptr))) {
    return fail(UG_ERR_INVALID, "ug_cuda_time: n < 0, or a NULL array");
  }
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (runs[i] < 0) return fail(UG_ERR_INVALID, "ug_cuda_time: runs[" + std::to_string(i) + "] < 0");
    total += runs[i];
    // Every call is checked before anything is queued: a refused one leaves the stream untouched.
    const ugraph::Verdict v = ugraph::check_call(&ps[i]);
    if (v.status != UG_OK) {
      if (failed != nullptr) *failed = i;
      return fail(v.status, v.why);
    }
  }
  if (total == 0) return UG_OK;
  Timer* t = nullptr;
  cudaError_t err = timer_for(&t);
  if (err == cudaSuccess) err = ensure_events(*t, static_cast<size_t>(total) + 1);
  if (err != cudaSuccess) return fail(UG_ERR_CUDA, cuda_why("ug_cuda_time: setting up", err));

  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  t->flags[0] = 0;
  t->flags[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint64_t timeout_ns = static_cast<uint64_t>(gate_timeout_ms > 0 ? gate_timeout_ms * 1e6 : 1e9);
  gate_kernel<<<1, 1, 0, s>>>(t->flags_dev, timeout_ns, t->flags_dev + 1);
  err = cudaGetLastError();
  if (err != cudaSuccess) return fail(UG_ERR_CUDA, cuda_why("ug_cuda_time: the gate", err));

  ugraph::Verdict queued{UG_OK, ""};
  int64_t k = 0;
  err = cudaEventRecord(t->events[0], s);
  for (int32_t i = 0; i < n && err == cudaSuccess && queued.status == UG_OK; ++i) {
    for (int32_t r = 0; r < runs[i]; ++r) {
      queued = ugraph::enqueue(ps[i], s);
      if (queued.status != UG_OK) {
        if (failed != nullptr) *failed = i;
        break;
      }
      err = cudaEventRecord(t->events[++k], s);
      if (err != cudaSuccess) break;
    }
  }
  // Raised on every path: the stream must drain before this returns.
  open_gate(*t);
  const cudaError_t sync = cudaStreamSynchronize(s);
  if (queued.status != UG_OK) return fail(queued.status, queued.why);
  if (err == cudaSuccess) err = sync;
  if (err != cudaSuccess) return fail(UG_ERR_CUDA, cuda_why("ug_cuda_time", err));
  if (starved != nullptr) *starved = *static_cast<volatile int32_t*>(t->flags + 1);
  for (int64_t j = 0; j < total; ++j) {
    err = cudaEventElapsedTime(&ms[j], t->events[j], t->events[j + 1]);
    if (err != cudaSuccess) return fail(UG_ERR_CUDA, cuda_why("ug_cuda_time: reading the events", err));
  }
  return UG_OK;
}

}  // extern "C"
