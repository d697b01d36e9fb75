// A training thread's working memory (its two walk plans, its scratch rows, its noise
// pool's slots and its context's output row pointers), kept by the process between calls
// to the trainer.
//
// The trainer is called once per chunk of walks. Working memory allocated and freed per
// call (about 300 KB a thread) would go back to the C heap every chunk, in the worker
// threads' own arenas, and could land elsewhere in the heap each time, so that a long run
// keeps more of its free pages; and the first bytes a thread allocates make glibc give
// it an arena of its own, whose first pages stay resident. So the training threads
// allocate nothing: workspaces are taken from a pool and given back when the call ends;
// a run allocates them once, in the calling thread, and later calls, whatever the graph,
// reuse them. The pool grows to the most threads that have trained at once.
#pragma once

#include "skipgram/noise.h"
#include "skipgram/plan.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace ge::skipgram {

// The sizes a workspace is reserved for: walks of `length` tokens, a window of `window`,
// `width` targets a context, rows of `dim` floats, a noise pool of `noise_pool` slots.
struct WorkspaceSizes {
  int64_t length, window, width, dim, noise_pool;
};

struct Workspace {
  WalkPlan plans[2];                   // the walk that trains and the next one, planned meanwhile
  std::vector<float> scratch;          // dim * width floats
  std::vector<NoiseSlot> noise_slots;  // capacity noise_pool (NoiseSource)
  // A context's output rows, `width` pointers, in each row format's pointer type
  // (output_rows.h): row_pointers<Row>().
  std::tuple<std::vector<float*>, std::vector<uint16_t*>, std::vector<uint8_t*>> rows;

  void reserve(const WorkspaceSizes& s) {
    for (auto& plan : plans) plan.reserve(s.length, s.window, s.width);
    scratch.resize(static_cast<size_t>(std::max<int64_t>(s.dim, 1) * s.width));
    noise_slots.reserve(static_cast<size_t>(s.noise_pool));
    std::apply([&](auto&... pointers) { (pointers.resize(static_cast<size_t>(s.width)), ...); },
               rows);
  }

  template <typename Row>
  Row* row_pointers() {
    return std::get<std::vector<Row>>(rows).data();
  }
};

class WorkspacePool {
 public:
  // `count` workspaces, reserved in the calling thread.
  std::vector<std::unique_ptr<Workspace>> take(int64_t count, const WorkspaceSizes& sizes) {
    std::vector<std::unique_ptr<Workspace>> taken;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int64_t>(taken.size()) < count && !free_.empty()) {
        taken.push_back(std::move(free_.back()));
        free_.pop_back();
      }
    }
    while (static_cast<int64_t>(taken.size()) < count) taken.push_back(std::make_unique<Workspace>());
    for (auto& workspace : taken) workspace->reserve(sizes);
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
  WorkspaceLease(int64_t count, const WorkspaceSizes& sizes)
      : workspaces_(WorkspacePool::process().take(count, sizes)) {}
  ~WorkspaceLease() { WorkspacePool::process().give_back(workspaces_); }
  WorkspaceLease(const WorkspaceLease&) = delete;
  WorkspaceLease& operator=(const WorkspaceLease&) = delete;

  Workspace& operator[](int64_t i) { return *workspaces_[static_cast<size_t>(i)]; }

 private:
  std::vector<std::unique_ptr<Workspace>> workspaces_;
};

}  // namespace ge::skipgram
