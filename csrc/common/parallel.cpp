// The thread pool behind parallel.h: threads started on first need, asleep between calls.

#include "common/parallel.h"

#include <pthread.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ge {

namespace {

std::atomic<int> thread_count{1};
thread_local bool inside_job = false;

class Pool {
 public:
  // Runs the job on `workers` threads, the caller's included; false when another thread
  // is using the pool (the caller then runs the job alone).
  bool try_run(int64_t workers, const std::function<void(int64_t)>& job) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int64_t>(threads_.size()) < workers - 1) {
        const int64_t id = static_cast<int64_t>(threads_.size()) + 1;
        threads_.emplace_back([this, id] { serve(id); });
        threads_.back().detach();  // never joined: asleep until the process ends
      }
      job_ = &job;
      workers_ = workers;
      pending_ = workers - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    run_one(job, 0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void run_one(const std::function<void(int64_t)>& job, int64_t worker) {
    inside_job = true;
    try {
      job(worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    inside_job = false;
  }

  void serve(int64_t id) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (id >= workers_) continue;
      const auto* job = job_;
      lock.unlock();
      run_one(*job, id);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_;   // held by the thread whose call the pool serves
  std::mutex mutex_;  // guards the fields below
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t workers_ = 0;
  int64_t pending_ = 0;
  uint64_t generation_ = 0;
  std::exception_ptr error_;
};

// Never destroyed: its threads sleep until the process ends. A child process after fork()
// has none of them, so it starts a pool of its own.
Pool* pool = nullptr;
std::once_flag pool_once;

void forget_pool_in_child() { pool = new Pool(); }

Pool& the_pool() {
  std::call_once(pool_once, [] {
    pool = new Pool();
    pthread_atfork(nullptr, nullptr, forget_pool_in_child);
  });
  return *pool;
}

}  // namespace

void set_num_threads(int threads) { thread_count.store(std::max(threads, 1)); }

int num_threads() { return inside_job ? 1 : thread_count.load(); }

void run_on_threads(int64_t workers, const std::function<void(int64_t)>& job) {
  if (workers > 1 && !inside_job && the_pool().try_run(workers, job)) return;
  const bool outer = !inside_job;
  inside_job = true;
  try {
    for (int64_t worker = 0; worker < workers; ++worker) job(worker);
  } catch (...) {
    if (outer) inside_job = false;
    throw;
  }
  if (outer) inside_job = false;
}

}  // namespace ge
