// The threads behind parallel.h: the OpenMP runtime that torch brought into the process,
// or else a pool of the library's own, started on first need and asleep between calls.
//
// Why torch's runtime first: after each of its parallel operations, torch's OpenMP threads
// spin for a while (GNU OpenMP's default wait policy) waiting for the next one. A kernel
// run on threads of its own right after a torch operation then shares the cores with
// those spinning threads: on 2 cores, a GraphSAGE batch's aggregations ran 10 to 15 %
// slower than with OMP_WAIT_POLICY=PASSIVE. Run on the runtime's threads, the kernel takes
// the spinning threads themselves, already awake. Every OpenMP runtime on Linux and macOS
// (GNU libgomp, LLVM libomp, Intel libiomp5) exports GNU's entry point GOMP_parallel, and
// torch loads its runtime into the global namespace; the library links none of its own.

#include "common/parallel.h"

#include <dlfcn.h>
#include <pthread.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ge {

namespace {

std::atomic<int> thread_count{1};
std::atomic<bool> openmp_allowed{true};
// GNU OpenMP's threads do not survive fork(), and a parallel region in a child of a process
// that had started them hangs: a forked child keeps to the own pool.
std::atomic<bool> forked_child{false};
const int fork_watch = pthread_atfork(nullptr, nullptr, [] { forked_child.store(true); });
thread_local bool inside_job = false;

// GNU OpenMP's `#pragma omp parallel`: fn(data) on num_threads threads, the caller's
// included, returning when all are done (flags 0: no proc_bind).
using OpenMPParallel = void (*)(void (*)(void*), void*, unsigned, unsigned);

OpenMPParallel process_openmp() {
  static const auto found =
      reinterpret_cast<OpenMPParallel>(dlsym(RTLD_DEFAULT, "GOMP_parallel"));
  return found;
}

// One call on OpenMP's threads. The runtime may give fewer threads than asked for (a
// thread limit, dynamic adjustment): each thread takes worker ids from `next` until none
// is left, so every worker runs once whatever the team's size (jobs never wait on each
// other: parallel.h). An exception never leaves a thread of the team.
struct OpenMPCall {
  const std::function<void(int64_t)>* job;
  int64_t workers;
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  std::exception_ptr error;

  static void run(void* self) {
    auto& call = *static_cast<OpenMPCall*>(self);
    const bool outer = !inside_job;
    inside_job = true;
    for (int64_t worker = call.next++; worker < call.workers; worker = call.next++) {
      try {
        (*call.job)(worker);
      } catch (...) {
        std::lock_guard<std::mutex> lock(call.mutex);
        if (!call.error) call.error = std::current_exception();
      }
    }
    if (outer) inside_job = false;
  }
};

bool try_openmp(int64_t workers, const std::function<void(int64_t)>& job) {
  const bool usable = openmp_allowed.load() && !forked_child.load();
  const OpenMPParallel parallel = usable ? process_openmp() : nullptr;
  if (parallel == nullptr) return false;
  OpenMPCall call;
  call.job = &job;
  call.workers = workers;
  parallel(&OpenMPCall::run, &call, static_cast<unsigned>(workers), 0);
  if (call.error) std::rethrow_exception(call.error);
  return true;
}

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

bool set_openmp(bool allowed) { return openmp_allowed.exchange(allowed); }

bool uses_openmp() {
  return openmp_allowed.load() && !forked_child.load() && process_openmp() != nullptr;
}

void run_on_threads(int64_t workers, const std::function<void(int64_t)>& job) {
  if (workers > 1 && !inside_job && (try_openmp(workers, job) || the_pool().try_run(workers, job)))
    return;
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
