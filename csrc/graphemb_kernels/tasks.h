// Parallel loops whose threads take tasks from a shared counter (aggregate.cpp, dropout.cpp,
// sparse_rows.cpp).
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

// Calls body(task) for every task in [0, tasks), on at::parallel_for's threads, each thread
// taking the next task from a shared counter rather than one fixed share of them: on a busy
// machine a thread the OS deschedules then holds up only the task in its hands, not half of
// the call (the other thread takes the rest).
// make_body() runs once on each thread and returns the body that thread applies to the
// tasks it takes (per-thread scratch space lives in it).
template <typename MakeBody>
void for_each_task_with(int64_t tasks, MakeBody&& make_body) {
  std::atomic<int64_t> next{0};
  const int64_t workers = std::min<int64_t>(tasks, at::get_num_threads());
  at::parallel_for(0, std::max<int64_t>(workers, 1), 1, [&](int64_t, int64_t) {
    auto body = make_body();
    for (int64_t task = next++; task < tasks; task = next++) body(task);
  });
}

// The same with one body shared by all threads.
template <typename Body>
void for_each_task(int64_t tasks, Body&& body) {
  for_each_task_with(tasks, [&] { return [&](int64_t task) { body(task); }; });
}
