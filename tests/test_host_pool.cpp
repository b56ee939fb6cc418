// The host backend's thread pool on its own: every task once, failures in a
// worker and in starting workers come back as clean errors.
#include <doctest/doctest.h>

#include <atomic>
#include <new>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "duet/error.hpp"
#include "host/thread_pool.hpp"

using duet::host::ThreadPool;

TEST_CASE("the pool runs every task once, call after call") {
  ThreadPool pool(4);
  CHECK(pool.threads() == 4);
  for (int call = 0; call < 50; ++call) {
    std::vector<std::atomic<int>> hits(97);
    pool.run(97, [&](std::int64_t i) { hits[std::size_t(i)]++; });
    for (auto& h : hits) CHECK(h.load() == 1);
  }
  pool.run(0, [](std::int64_t) { FAIL("a task of an empty run"); });
}

TEST_CASE("tasks on the workers know it; the caller is not a worker") {
  ThreadPool pool(3);
  std::atomic<int> on_workers{0}, on_caller{0};
  const auto caller = std::this_thread::get_id();
  pool.run(64, [&](std::int64_t) {
    if (std::this_thread::get_id() == caller) {
      if (!ThreadPool::on_worker_thread()) ++on_caller;
    } else if (ThreadPool::on_worker_thread()) {
      ++on_workers;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  });
  CHECK(on_workers.load() + on_caller.load() == 64);
  CHECK_FALSE(ThreadPool::on_worker_thread());
}

TEST_CASE("an allocation failure inside a worker is out_of_memory on the caller, and the pool goes on") {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> thrown{false};
  try {
    // Every task that lands on the worker fails as an allocation would; the
    // caller's tasks wait until one has, so the worker surely takes one.
    pool.run(1000, [&](std::int64_t) {
      if (std::this_thread::get_id() != caller) {
        thrown = true;
        throw std::bad_alloc();
      }
      while (!thrown) std::this_thread::yield();
    });
    FAIL("the failure was lost");
  } catch (const duet::Error& e) {
    CHECK(e.status() == duet::Status::out_of_memory);
    CHECK(std::string(e.what()).find("worker") != std::string::npos);
  }
  std::atomic<int> done{0};
  pool.run(10, [&](std::int64_t) { ++done; });
  CHECK(done.load() == 10);
  // Other exceptions come back as they are.
  CHECK_THROWS_AS(pool.run(3, [](std::int64_t) { throw std::runtime_error("task failed"); }), std::runtime_error);
}

TEST_CASE("a worker that cannot be started leaves a smaller pool, not an abort") {
  for (int startable : {0, 1, 2}) {
    int started = 0;
    ThreadPool pool(8, [&](std::function<void()> body) {
      if (started == startable) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
      ++started;
      return std::thread(std::move(body));
    });
    CHECK(pool.threads() == startable + 1);
    std::atomic<int> done{0};
    pool.run(100, [&](std::int64_t) { ++done; });
    CHECK(done.load() == 100);
  }
}
