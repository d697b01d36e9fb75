// The per-row arithmetic of the optimizer formulas (graphemb/optim/functional.py): one
// weight row and its state rows updated from one summed gradient row.
//
// The loops over a row's elements are compute bound once the rows are prefetched (a
// square root and a division per element for Adam and Adagrad), so the float32 and
// float64 tables run them in the clones of common/clones.h: AVX-512, AVX2 or baseline,
// chosen when the library loads, each giving the same floats (no contracted FMAs). The
// 16-bit storage types run the baseline template (their conversions dominate).
#pragma once

#include "common/clones.h"
#include "common/floats.h"

#include <cmath>
#include <cstdint>

namespace ge {

// Adam's coefficients for one row: the constants of the step, and the bias corrections
// of the row's own step count (lr / (1 - beta1^t) and 1 / sqrt(1 - beta2^t)).
template <typename C>
struct AdamCoefficients {
  C one_minus_beta1;
  C beta2;
  C one_minus_beta2;
  C eps;
  C step_size;
  C inv_bias_correction2_sqrt;
  bool moments_only;  // lr == 0: the moments move, the weight does not
};

template <typename W, typename C>
inline void sgd_row(W* __restrict__ w, const C* __restrict__ g, int64_t dim, C lr) {
#pragma omp simd
  for (int64_t j = 0; j < dim; ++j) w[j] = store<W>(load<C>(w[j]) - lr * g[j]);
}

// mean(g * g) over a row of `dim`, for row-wise Adagrad. The squares go into kSquareLanes
// partial sums (element j into sum j % kSquareLanes), which vector units of any width add
// side by side, then into one by a fixed pairwise tree: the same float in every clone,
// where one running sum would wait on each addition before the next (dim additions in a
// chain per row, the larger part of the step's time at dim 128).
constexpr int64_t kSquareLanes = 16;

template <typename C>
inline C mean_square(const C* __restrict__ g, int64_t dim) {
  C part[kSquareLanes] = {};
  int64_t j = 0;
  for (; j + kSquareLanes <= dim; j += kSquareLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kSquareLanes; ++k) part[k] += g[j + k] * g[j + k];
  }
  for (int64_t k = 0; j < dim; ++j, ++k) part[k] += g[j] * g[j];
  for (int64_t width = kSquareLanes / 2; width > 0; width /= 2) {
    for (int64_t k = 0; k < width; ++k) part[k] += part[k + width];
  }
  return part[0] / static_cast<C>(dim);
}

template <typename W, typename C>
inline void adagrad_row(W* __restrict__ w, C* __restrict__ s, const C* __restrict__ g,
                        int64_t dim, C lr, C eps) {
#pragma omp simd
  for (int64_t j = 0; j < dim; ++j) {
    const C sum = s[j] + g[j] * g[j];
    s[j] = sum;
    w[j] = store<W>(load<C>(w[j]) - lr * g[j] / (std::sqrt(sum) + eps));
  }
}

template <typename W, typename C>
inline void adam_row(W* __restrict__ w, C* __restrict__ m, C* __restrict__ v,
                     const C* __restrict__ g, int64_t dim, const AdamCoefficients<C>& a) {
  if (a.moments_only) {  // as functional.adam_rows_ with lr == 0
#pragma omp simd
    for (int64_t j = 0; j < dim; ++j) {
      m[j] += a.one_minus_beta1 * (g[j] - m[j]);
      v[j] = v[j] * a.beta2 + a.one_minus_beta2 * g[j] * g[j];
    }
    return;
  }
#pragma omp simd
  for (int64_t j = 0; j < dim; ++j) {  // one pass over m, v and w
    const C mj = m[j] + a.one_minus_beta1 * (g[j] - m[j]);  // lerp, as torch's Adam
    const C vj = v[j] * a.beta2 + a.one_minus_beta2 * g[j] * g[j];
    m[j] = mj;
    v[j] = vj;
    const C denom = std::sqrt(vj) * a.inv_bias_correction2_sqrt + a.eps;
    w[j] = store<W>(load<C>(w[j]) - a.step_size * mj / denom);
  }
}

// The float32 and float64 tables' overloads, in clones (overload resolution prefers them to
// the templates, which the 16-bit storage types run).
#define GE_ROW_CLONES(T)                                                                      \
  GE_FLOAT_CLONES inline T mean_square(const T* g, int64_t dim) {                             \
    return mean_square<T>(g, dim);                                                            \
  }                                                                                           \
  GE_FLOAT_CLONES inline void sgd_row(T* w, const T* g, int64_t dim, T lr) {                  \
    sgd_row<T, T>(w, g, dim, lr);                                                             \
  }                                                                                           \
  GE_FLOAT_CLONES inline void adagrad_row(T* w, T* s, const T* g, int64_t dim, T lr, T eps) { \
    adagrad_row<T, T>(w, s, g, dim, lr, eps);                                                 \
  }                                                                                           \
  GE_FLOAT_CLONES inline void adam_row(T* w, T* m, T* v, const T* g, int64_t dim,             \
                                       const AdamCoefficients<T>& a) {                        \
    adam_row<T, T>(w, m, v, g, dim, a);                                                       \
  }
GE_ROW_CLONES(float)
GE_ROW_CLONES(double)
#undef GE_ROW_CLONES

}  // namespace ge
