// The host backend's one thread pool, as a call takes it: the pool when it
// is free and the caller is not one of its workers, else none (the call runs
// on the calling thread: another application thread holds the pool, or a
// pool task calls duet, and waiting for the pool there would deadlock).
#pragma once

#include <mutex>

#include "host/thread_pool.hpp"

namespace duet::host {

class PoolLease {
 public:
  PoolLease();  // defined with the pool, in host_backend.cpp
  PoolLease(const PoolLease&) = delete;
  PoolLease& operator=(const PoolLease&) = delete;
  ThreadPool* pool() const noexcept { return pool_; }
  int threads() const noexcept { return pool_ != nullptr ? pool_->threads() : 1; }

 private:
  std::unique_lock<std::mutex> lock_;
  ThreadPool* pool_ = nullptr;
};

}  // namespace duet::host
