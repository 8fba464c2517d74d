// The CPU backend's last-error text, one per thread, as api.h promises.
#ifndef UGRAPH_CPU_ERROR_H_
#define UGRAPH_CPU_ERROR_H_

namespace ugraph {
namespace cpu {

// Records a printf-style message for ug_cpu_last_error() and returns status, so that a check
// reads `return fail(UG_ERR_INVALID, "...", ...);`.
int fail(int status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Clears the message at the start of each call, so a stale text never describes a success.
void clear_error();

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_ERROR_H_
