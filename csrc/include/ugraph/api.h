/* C entry points of the two backends. Neither links libtorch or Python. */
#ifndef UGRAPH_API_H_
#define UGRAPH_API_H_

#include "ugraph/params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CPU backend (OpenMP). Ignores strategy/grouping/tiling and workspace. */
int ug_cpu_run(const UgParams* p);

/* CUDA backend, in libugraph_cuda. stream is a cudaStream_t. Asynchronous: returns once queued. */
int ug_cuda_run(const UgParams* p, void* stream);
/* Bytes of device workspace that ug_cuda_run needs for p (0 when none). */
int64_t ug_cuda_workspace_bytes(const UgParams* p);
/* 0 when p's strategy can run p; otherwise a status, with the reason copied into why. */
int ug_cuda_check(const UgParams* p, char* why, int why_len);
/* Times the calls ps[0..n) on stream, for the collector and the autotuner: runs[i] launches of
   ps[i], queued in that order behind a gate that holds the stream until all are queued (a queued
   batch beyond about a thousand launches and events blocks the host until gate_timeout_ms passes).
   ms receives sum(runs) entries, each launch's time in queue order; *starved is set when the gate
   timed out before the host finished queueing (time that batch again, smaller). Every call is
   checked first: a refused one queues nothing and names its index in *failed. Synchronizes the
   stream. */
int ug_cuda_time(const UgParams* ps, const int32_t* runs, int32_t n, void* stream, float gate_timeout_ms,
                 float* ms, int32_t* starved, int32_t* failed);
/* Hash of the CUDA sources this library was built from, its architectures, and what it holds. */
const char* ug_cuda_source_hash(void);
/* Bit (strategy * 4 + dtype) is set for each (UgStrategy, UgDType) compiled into this library. */
uint32_t ug_cuda_compiled_keys(void);
const char* ug_cuda_build_info(void);

/* Text of the last error on this thread, one per backend (each library defines its own). */
const char* ug_cpu_last_error(void);
const char* ug_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* UGRAPH_API_H_ */
