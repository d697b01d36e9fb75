// A training thread's working memory (its two walk plans and its scratch rows), kept by the
// process between calls to the trainer.
//
// The trainer is called once per chunk of walks, on the kernels' threads (common/parallel.h),
// which outlive the call. Working memory allocated and freed per call (about 300 KB a
// thread) would go back to the C heap every chunk, in the worker threads' own arenas, and
// could land elsewhere in the heap each time, so that a long run keeps more of its free
// pages. Workspaces are instead taken from a pool and given back when the call ends: a run
// allocates them once, in the calling thread, and later calls, whatever the graph, reuse
// them. The pool grows to the most threads that have trained at once. (The noise pool's
// slots and a context's row pointers, a few KB, stay the thread's own per call: kept here
// instead, they made the main heap's touched free pages creep by about 4 KB a second at 1M
// nodes.)
#pragma once

#include "skipgram/plan.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace ge::skipgram {

struct Workspace {
  WalkPlan plans[2];           // the walk that trains and the next one, planned meanwhile
  std::vector<float> scratch;  // dim * width floats

  // Sized for walks of `length` tokens, a window of `window` and `width` targets a context.
  void reserve(int64_t length, int64_t window, int64_t width, int64_t dim) {
    for (auto& plan : plans) plan.reserve(length, window, width);
    scratch.resize(static_cast<size_t>(std::max<int64_t>(dim, 1) * width));
  }
};

class WorkspacePool {
 public:
  // `count` workspaces, reserved in the calling thread.
  std::vector<std::unique_ptr<Workspace>> take(int64_t count, int64_t length, int64_t window,
                                               int64_t width, int64_t dim) {
    std::vector<std::unique_ptr<Workspace>> taken;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int64_t>(taken.size()) < count && !free_.empty()) {
        taken.push_back(std::move(free_.back()));
        free_.pop_back();
      }
    }
    while (static_cast<int64_t>(taken.size()) < count) taken.push_back(std::make_unique<Workspace>());
    for (auto& workspace : taken) workspace->reserve(length, window, width, dim);
    return taken;
  }

  void give_back(std::vector<std::unique_ptr<Workspace>>& workspaces) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& workspace : workspaces) free_.push_back(std::move(workspace));
    workspaces.clear();
  }

  static WorkspacePool& process() {
    static WorkspacePool* pool = new WorkspacePool();  // never destroyed: threads may outlive exit
    return *pool;
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Workspace>> free_;
};

// The workspaces of one call, given back when it ends (or throws).
class WorkspaceLease {
 public:
  WorkspaceLease(int64_t count, int64_t length, int64_t window, int64_t width, int64_t dim)
      : workspaces_(WorkspacePool::process().take(count, length, window, width, dim)) {}
  ~WorkspaceLease() { WorkspacePool::process().give_back(workspaces_); }
  WorkspaceLease(const WorkspaceLease&) = delete;
  WorkspaceLease& operator=(const WorkspaceLease&) = delete;

  Workspace& operator[](int64_t i) { return *workspaces_[static_cast<size_t>(i)]; }

 private:
  std::vector<std::unique_ptr<Workspace>> workspaces_;
};

}  // namespace ge::skipgram
