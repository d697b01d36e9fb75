// Parallel loops of the kernels, on the threads of the OpenMP runtime torch loaded into the
// process, else on a pool of threads of the library's own (parallel.cpp says why).
//
// The library links no OpenMP runtime: two runtimes in one process would keep two sets of
// threads on the same cores. The own pool's threads sleep on a condition variable between
// calls (no spinning), take their share of a call, and the calling thread works as one of
// them. The thread count is the caller's (ge_set_num_threads: graphemb passes
// torch.get_num_threads()).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>

namespace ge {

void set_num_threads(int threads);
int num_threads();

// Whether calls may run on the process's OpenMP runtime (default true); returns the last
// setting. With false, or with no runtime in the process, they run on the own pool.
bool set_openmp(bool allowed);
// Whether calls run on the process's OpenMP runtime now.
bool uses_openmp();

// Runs job(worker) for worker in [0, workers) on up to as many threads (the caller's
// included) and returns when all are done; rethrows the first exception a worker threw.
// A job must never wait for another worker's: inside another call's job, or while the own
// pool serves another Python thread, the workers run one after the other on the calling
// thread, and OpenMP may give a call fewer threads than it asks for.
void run_on_threads(int64_t workers, const std::function<void(int64_t)>& job);

// f(chunk, chunk_begin, chunk_end) over [begin, end) in at most num_threads() contiguous
// chunks of at least `grain` elements, chunk = 0, 1, ... (one call on the calling thread
// when the range is at most `grain`): for loops that keep per-chunk scratch space.
template <typename F>
void parallel_chunks(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
  const int64_t range = end - begin;
  const int64_t chunks =
      std::min<int64_t>(num_threads(), (range + std::max<int64_t>(grain, 1) - 1) /
                                           std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    f(int64_t{0}, begin, end);
    return;
  }
  const int64_t size = (range + chunks - 1) / chunks;
  run_on_threads(chunks, [&](int64_t chunk) {
    const int64_t first = begin + chunk * size;
    if (first < end) f(chunk, first, std::min(end, first + size));
  });
}

// at::parallel_for's contract: f(chunk_begin, chunk_end) over [begin, end) in at most
// num_threads() contiguous chunks of at least `grain` elements (one call on the calling
// thread when the range is at most `grain`).
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  parallel_chunks(begin, end, grain, [&](int64_t, int64_t b, int64_t e) { f(b, e); });
}

// Calls body(task) for every task in [0, tasks), each thread taking the next task from a
// shared counter rather than one fixed share: on a busy machine a thread the OS
// deschedules then holds up only the task in its hands. make_body() runs once on each
// thread and returns the body that thread applies (per-thread scratch space lives in it).
template <typename MakeBody>
void for_each_task_with(int64_t tasks, MakeBody&& make_body) {
  std::atomic<int64_t> next{0};
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(tasks, num_threads()));
  run_on_threads(workers, [&](int64_t) {
    auto body = make_body();
    for (int64_t task = next++; task < tasks; task = next++) body(task);
  });
}

// The same with one body shared by all threads.
template <typename Body>
void for_each_task(int64_t tasks, Body&& body) {
  for_each_task_with(tasks, [&] { return [&](int64_t task) { body(task); }; });
}

}  // namespace ge
