// Broadcast offsets as runs: the shape of DGL's BcastOff tables that lets the broadcast
// kernels keep a plain simd loop.
//
// DGL's broadcasting (CalcBcastOff) walks the output's last dimension with each operand either
// stepping along its own last dimension or standing still on a broadcast one. So output
// elements [o*run, (o+1)*run) read A at a_off[o*run] + i*a_step and B at b_off[o*run] + i*b_step,
// with steps 0 or 1: an (E,1) edge weight times (N,F) features is one run of F with b_step 0,
// GAT's (N,H,D) x (E,H,1) is H runs of D. Tables of any other shape get run 1 (one element per
// run), which is correct for every table, just not fast.
#ifndef UGRAPH_CPU_BROADCAST_H_
#define UGRAPH_CPU_BROADCAST_H_

#include <cstdint>

namespace ugraph {
namespace cpu {

struct Runs {
  int64_t run = 1;
  int a_step = 1, b_step = 1;  // 0 or 1; never both 0 when run > 1
  // GAT's layout: the stepping operand reads its row contiguously (off[j] = off[0] + j) and the
  // standing one a single element per run, in order (off[j] = off[0] + j / run). Then any
  // block of whole runs reads both operands at fixed offsets from its first element.
  bool heads = false;
};

// a_off/b_off: [out_len] tables; NULL for an operand the edge_op does not read.
Runs plan_runs(const int64_t* a_off, const int64_t* b_off, int64_t out_len);

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_BROADCAST_H_
