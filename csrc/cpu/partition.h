// Splitting aggregation work evenly, by edges and rows together (merge path).
//
// Walk the CSC as one sequence of items: for each destination row, its edges, then one "end of
// row" token. Segment k of S takes items [k*W/S, (k+1)*W/S) of the W = num_edges + num_dst
// items, so every segment (one per thread) gets the same number of edges plus rows, whatever
// the degree skew: a row holding half of all edges is cut between segments. A segment
// finalizes each row whose end token it holds; the edges it holds of a row that ends in a later
// segment become a "tail" partial, and the owner of that row folds the earlier segments' tails
// in segment order (which is CSC order, so max/min keep the first-position rule) into its own
// "head" partial of the row.
#ifndef UGRAPH_CPU_PARTITION_H_
#define UGRAPH_CPU_PARTITION_H_

#include <cstdint>

namespace ugraph {
namespace cpu {

struct Segment {
  int64_t v0, p0;      // first item: row v0, position p0 (indptr[v0] <= p0 <= indptr[v0 + 1])
  int64_t v1, p1;      // one past the last item, in the same coordinates
  bool has_head;       // row v0 is finalized here but earlier segments hold some of its edges
  bool has_tail;       // this segment holds edges of row v1, which a later segment finalizes
};

// The path coordinates of item d: the largest row v with indptr[v] + v <= d, and p = d - v.
template <typename I>
void path_point(const I* indptr, int64_t num_rows, int64_t d, int64_t* v, int64_t* p) {
  int64_t lo = 0, hi = num_rows;
  while (lo < hi) {
    const int64_t mid = hi - (hi - lo) / 2;
    if (int64_t(indptr[mid]) + mid <= d) lo = mid; else hi = mid - 1;
  }
  *v = lo;
  *p = d - lo;
}

template <typename I>
Segment segment_of(const I* indptr, int64_t num_rows, int64_t num_edges, int64_t k, int64_t segments) {
  const int64_t items = num_edges + num_rows;
  Segment s;
  path_point(indptr, num_rows, items * k / segments, &s.v0, &s.p0);
  path_point(indptr, num_rows, items * (k + 1) / segments, &s.v1, &s.p1);
  s.has_head = s.v0 < s.v1 && s.p0 > int64_t(indptr[s.v0]);
  const int64_t tail_begin = s.v0 == s.v1 ? s.p0 : int64_t(indptr[s.v1 < num_rows ? s.v1 : num_rows]);
  s.has_tail = s.v1 < num_rows && s.p1 > tail_begin;
  return s;
}

// Threads for `work` scalar operations: one below the size where a team's start-up costs more
// than it saves, never more than OpenMP offers.
int threads_for(int64_t work);

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_PARTITION_H_
