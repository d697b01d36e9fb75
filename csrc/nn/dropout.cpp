// Dropout without a stored mask: element i of a call is kept when a 16-bit hash of
// (key, i) is at least `threshold` = round(p * 2^16), so it is kept with probability
// 1 - threshold / 2^16 (p to within 2^-17), independently of every other element.
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
// consecutive counters every word comes out once, and the finalizer's full avalanche makes
// neighbouring counters give unrelated words. Each word decides two elements, one per
// 16-bit half (hashed_mask.h says which): the hash is the costliest part of the
// aggregation kernels that apply the mask to every row they read, and half as many hashes
// make the end-to-end GraphSAGE layers 1.02-1.06x faster (forward + backward, on the three
// graph shapes; one finalizer per word instead of two had made them 1.047x faster). The
// tests hold the keep rate, the joint pattern of neighbours (the two halves of a word among
// them) and the independence of two calls to binomial and chi-square bounds. All 32-bit
// integer arithmetic: the loop is compiled for AVX-512, AVX2 and any x86-64 CPU
// (clones.h); the result does not depend on which, nor on the number of threads.

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

// Elements [begin, end) of one call: out = x * factor, the factors a block of 16 at a time.
template <typename T>
inline __attribute__((always_inline)) void scale_range(const T* x, T* out, int64_t begin,
                                                       int64_t end, uint32_t threshold, T scale,
                                                       uint64_t key) {
  const T* xs = x + begin;
  T* os = out + begin;
  HashedMask<T>::of(threshold, scale, key).for_each_factor(
      begin, end - begin, [&](auto j, T factor) { os[j] = xs[j] * factor; });
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

// Calls body(begin, end) over tasks of kGrain elements taken from a shared counter; tasks
// start at multiples of 16, so only the last can end inside a block of the mask.
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
    require(threshold < kMaskLevels, GE_VALUE_ERROR, "graphemb_kernels.dropout_masked_scale: ",
            "threshold = ", threshold, " is not in [0, 2^16)");
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
