// A persistent pool of worker threads for the host backend: started once,
// woken per call, never a thread per call.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace duet::host {

class ThreadPool {
 public:
  // Starts threads - 1 workers (the calling thread is the last one). A
  // worker that cannot be started leaves the pool smaller, never an error.
  // `start` makes one worker thread; tests pass one that fails.
  using StartThread = std::function<std::thread(std::function<void()>)>;
  explicit ThreadPool(int threads, StartThread start = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that run tasks: the workers started plus the caller.
  int threads() const noexcept { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(i) for every i in [0, tasks) on the workers and the calling
  // thread, and returns when all have finished. The first exception a task
  // throws is rethrown here, on the calling thread (std::bad_alloc as
  // duet::Error(out_of_memory)); the remaining tasks are skipped. One call at
  // a time: the owner serializes them.
  void run(std::int64_t tasks, const std::function<void(std::int64_t)>& task);

  // True on a thread of any ThreadPool: a call from there runs inline.
  static bool on_worker_thread() noexcept;

 private:
  void worker_loop();
  void take_tasks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stopping_ = false;
  std::uint64_t generation_ = 0;  // bumped once per run()
  int busy_workers_ = 0;          // workers still inside the current run()
  const std::function<void(std::int64_t)>* task_ = nullptr;
  std::int64_t tasks_ = 0;
  std::int64_t next_task_ = 0;  // guarded by mutex_: tasks are coarse
  std::exception_ptr failure_;
};

// Rethrows `failure`, std::bad_alloc as duet::Error(out_of_memory) naming
// `what`.
void rethrow_as_duet_error(std::exception_ptr failure, const char* what);

}  // namespace duet::host
