#include "broadcast.h"

namespace ugraph {
namespace cpu {
namespace {

// Whether off steps by `step` within every run of `run` elements (a NULL table always does).
bool steps_within_runs(const int64_t* off, int64_t out_len, int64_t run, int step) {
  if (!off) return true;
  for (int64_t j = 0; j < out_len; ++j)
    if (j % run && off[j] != off[j - 1] + step) return false;
  return true;
}

// Whether off[j] = off[0] + j / per for every j (a NULL table never is).
bool advances_every(const int64_t* off, int64_t out_len, int64_t per) {
  if (!off) return false;
  for (int64_t j = 0; j < out_len; ++j)
    if (off[j] != off[0] + j / per) return false;
  return true;
}

}  // namespace

Runs plan_runs(const int64_t* a_off, const int64_t* b_off, int64_t out_len) {
  Runs r;
  if (out_len < 2) return r;
  const int64_t da = a_off ? a_off[1] - a_off[0] : 1, db = b_off ? b_off[1] - b_off[0] : 1;
  if ((da != 0 && da != 1) || (db != 0 && db != 1) || (da == 0 && db == 0)) return r;
  // The first run ends where either table stops stepping the same way.
  int64_t run = 2;
  while (run < out_len && (!a_off || a_off[run] == a_off[run - 1] + da) &&
         (!b_off || b_off[run] == b_off[run - 1] + db))
    ++run;
  if (out_len % run || !steps_within_runs(a_off, out_len, run, int(da)) ||
      !steps_within_runs(b_off, out_len, run, int(db)))
    return r;
  r.run = run;
  r.a_step = int(da);
  r.b_step = int(db);
  r.heads = da ? advances_every(a_off, out_len, 1) && advances_every(b_off, out_len, run)
               : advances_every(b_off, out_len, 1) && advances_every(a_off, out_len, run);
  return r;
}

}  // namespace cpu
}  // namespace ugraph
