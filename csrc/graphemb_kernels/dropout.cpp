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
// The hash: murmur3's 32-bit finalizer, twice, over the element's counter and the two
// halves of the key (a different key per call, drawn from torch's generator by the caller).
// The finalizer is a bijection with full avalanche, so neighbouring counters give
// unrelated words; the tests hold the keep rate, the joint pattern of neighbours and the
// independence of two calls to binomial and chi-square bounds. All 32-bit integer
// arithmetic: the loop is compiled twice, with AVX2 (8 elements a vector op) where the CPU
// has it, and for any x86-64 CPU; the result does not depend on which, nor on the number
// of threads.

#include "dropout.h"
#include "tasks.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cstdint>

namespace {

constexpr int64_t kGrain = 1 << 15;  // elements per task

inline uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6BU;
  h ^= h >> 13;
  h *= 0xC2B2AE35U;
  h ^= h >> 16;
  return h;
}

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
    const uint32_t word = fmix32(fmix32((first + j) * 0x9E3779B9U + low_key) ^ high);
    os[j] = xs[j] * (word >= threshold ? scale : T(0));
  }
}

__attribute__((target_clones("avx2", "default"))) void scale_floats(
    const float* x, float* out, int64_t begin, int64_t end, uint32_t threshold, float scale,
    uint64_t key) {
  scale_range(x, out, begin, end, threshold, scale, key);
}

__attribute__((target_clones("avx2", "default"))) void scale_doubles(
    const double* x, double* out, int64_t begin, int64_t end, uint32_t threshold, double scale,
    uint64_t key) {
  scale_range(x, out, begin, end, threshold, scale, key);
}

}  // namespace

at::Tensor dropout_masked_scale(const at::Tensor& x, int64_t threshold, double scale,
                                int64_t key) {
  RECORD_FUNCTION("graphemb_kernels::dropout_masked_scale", std::vector<c10::IValue>());
  TORCH_CHECK_VALUE(x.device().is_cpu() && x.is_contiguous(),
                    "graphemb_kernels.dropout_masked_scale: x must be a contiguous CPU tensor");
  TORCH_CHECK_VALUE(threshold >= 0 && threshold <= 0xFFFFFFFFLL,
                    "graphemb_kernels.dropout_masked_scale: threshold = ", threshold,
                    " is not in [0, 2^32)");
  at::Tensor out = at::empty_like(x);
  const int64_t n = x.numel();
  const auto t = static_cast<uint32_t>(threshold);
  const auto k = static_cast<uint64_t>(key);
  // a task never straddles a multiple of 2^32 elements (grain divides 2^32)
  auto split = [&](auto&& body) {  // tasks taken from a shared counter (tasks.h)
    for_each_task((n + kGrain - 1) / kGrain,
                  [&](int64_t c) { body(c * kGrain, std::min(n, (c + 1) * kGrain)); });
  };
  if (x.scalar_type() == at::kFloat) {
    const float* xs = x.data_ptr<float>();
    float* os = out.data_ptr<float>();
    const auto s = static_cast<float>(scale);
    split([&](int64_t b, int64_t e) { scale_floats(xs, os, b, e, t, s, k); });
  } else {
    TORCH_CHECK_TYPE(x.scalar_type() == at::kDouble,
                     "graphemb_kernels.dropout_masked_scale: x must be float32 or float64, got ",
                     x.scalar_type());
    const double* xs = x.data_ptr<double>();
    double* os = out.data_ptr<double>();
    split([&](int64_t b, int64_t e) { scale_doubles(xs, os, b, e, t, scale, k); });
  }
  return out;
}

void bind_dropout(pybind11::module_& module) {
  module.def("dropout_masked_scale", &dropout_masked_scale,
             "x * scale where hash(key, i) >= threshold, else 0, per element i of a "
             "contiguous float32/float64 CPU tensor (dropout's forward, and its backward "
             "on the gradient with the same key)",
             pybind11::arg("x"), pybind11::arg("threshold"), pybind11::arg("scale"),
             pybind11::arg("key"), pybind11::call_guard<pybind11::gil_scoped_release>());
}
