#include "host/thread_pool.hpp"

#include <new>
#include <string>

#include "duet/error.hpp"
#include "host/host_kernels.hpp"

namespace duet::host {
namespace {
thread_local bool t_on_worker = false;
}

bool ThreadPool::on_worker_thread() noexcept { return t_on_worker; }

float* thread_scratch(std::size_t floats) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < floats) scratch.resize(floats);
  return scratch.data();
}

ThreadPool::ThreadPool(int threads, StartThread start) {
  if (!start) start = [](std::function<void()> body) { return std::thread(std::move(body)); };
  const int wanted_workers = threads > 1 ? threads - 1 : 0;
  try {
    workers_.reserve(static_cast<std::size_t>(wanted_workers));
    for (int i = 0; i < wanted_workers; ++i) workers_.push_back(start([this] { worker_loop(); }));
  } catch (...) {
    // No thread (EAGAIN under ulimit -u, no memory for a stack): run on the
    // workers started so far.
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::take_tasks() {
  for (;;) {
    std::int64_t i;
    {
      std::lock_guard lock(mutex_);
      if (next_task_ >= tasks_) return;
      i = next_task_++;
    }
    try {
      (*task_)(i);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
      next_task_ = tasks_;  // skip what is left
    }
  }
}

void ThreadPool::worker_loop() {
  t_on_worker = true;
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    take_tasks();
    {
      std::lock_guard lock(mutex_);
      if (--busy_workers_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::run(std::int64_t tasks, const std::function<void(std::int64_t)>& task) {
  if (tasks <= 0) return;
  const bool use_workers = !workers_.empty() && tasks > 1;
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    tasks_ = tasks;
    next_task_ = 0;
    failure_ = nullptr;
    if (use_workers) {
      busy_workers_ = static_cast<int>(workers_.size());
      ++generation_;
    }
  }
  if (use_workers) wake_.notify_all();
  take_tasks();
  std::exception_ptr failure;
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return busy_workers_ == 0; });
    failure = failure_;
    failure_ = nullptr;
    task_ = nullptr;
  }
  if (failure) rethrow_as_duet_error(failure, "a host worker thread");
}

void rethrow_as_duet_error(std::exception_ptr failure, const char* what) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, std::string(what) + " ran out of memory");
  }
}

}  // namespace duet::host
