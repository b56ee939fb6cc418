// How the host backend cuts one call into tasks for its threads: a pure
// function of the shape, shared by the backend and deviceinfo's plan lines.
#pragma once

#include <algorithm>
#include <cstdint>

namespace duet::host {

struct HostWorkSplit {
  int threads = 1;                // threads that take part (1: the caller alone)
  std::int64_t tasks = 1;         // tasks the threads take in turn
  std::int64_t rows_per_task = 0; // whole rows a task runs (0 when rows are split)
  std::int64_t parts_per_row = 1; // > 1: each row cut into this many ranges, two phases
  std::int64_t part_elems = 0;    // elements of one range when rows are split
};

// A call moving less than this runs on the calling thread: waking the pool
// costs more than it saves.
constexpr std::int64_t kHostParallelBytes = std::int64_t(1) << 19;
// The least a task moves, so waking a thread pays for itself.
constexpr std::int64_t kHostTaskBytes = std::int64_t(1) << 17;
// Rows at least this wide are split across threads when there are fewer rows
// than threads to keep busy.
constexpr std::int64_t kHostSplitRowBytes = std::int64_t(1) << 18;

constexpr HostWorkSplit host_work_split(std::int64_t rows, std::int64_t cols, int elem_bytes, bool backward,
                                        int threads) {
  HostWorkSplit s;
  const std::int64_t row_bytes = cols * elem_bytes * (backward ? 3 : 2);
  const std::int64_t bytes = rows * row_bytes;
  s.rows_per_task = rows;
  if (threads <= 1 || rows <= 0 || bytes < kHostParallelBytes) return s;
  s.threads = threads;
  if (rows < 2 * std::int64_t(threads) && row_bytes >= kHostSplitRowBytes) {
    // Few wide rows: every row in `threads` ranges of whole cache lines.
    s.parts_per_row = std::min<std::int64_t>(threads, std::max<std::int64_t>(1, row_bytes / kHostTaskBytes));
    s.part_elems = (cols + s.parts_per_row - 1) / s.parts_per_row;
    s.part_elems = (s.part_elems + 63) / 64 * 64;
    s.parts_per_row = (cols + s.part_elems - 1) / s.part_elems;
    s.tasks = rows * s.parts_per_row;
    s.rows_per_task = 0;
    return s;
  }
  // Contiguous row ranges, about four a thread so a slow thread's share is
  // picked up by the others, each moving at least kHostTaskBytes.
  const std::int64_t by_size = std::max<std::int64_t>(1, bytes / kHostTaskBytes);
  s.tasks = std::min({rows, std::int64_t(threads) * 4, by_size});
  s.rows_per_task = (rows + s.tasks - 1) / s.tasks;
  s.tasks = (rows + s.rows_per_task - 1) / s.rows_per_task;
  if (s.tasks == 1) s.threads = 1;
  return s;
}

}  // namespace duet::host
