#include "error.h"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "ugraph/api.h"

namespace ugraph {
namespace cpu {
namespace {
thread_local std::string last_error;
}  // namespace

int fail(int status, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  last_error = buf;
  return status;
}

void clear_error() { last_error.clear(); }

}  // namespace cpu
}  // namespace ugraph

extern "C" const char* ug_cpu_last_error(void) { return ugraph::cpu::last_error.c_str(); }
