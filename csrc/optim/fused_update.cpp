// Fused CPU kernels of graphemb's sparse optimizers.
//
// One pass per updated row: sum the row's gradient contributions, divide by the world
// size, and apply the optimizer's formula to the weight and state rows in place -- instead
// of the pure-torch path's coalesce -> gather -> ~7 elementwise passes -> scatter, which
// moves every row through memory about 30 times. The formulas are those of
// graphemb/optim/functional.py (the reference, also used on GPUs and without this
// library). Arguments of ge_fused_update (graphemb_kernels.h):
//   formula       position in the formula table (formulas.h)
//   state         the formula's state tables, in the table's order: (rows, dim) per element
//                 or (rows,) per row in the compute dtype, (rows,) int64 for counts
//   index   (M,)  table rows, sorted ascending (runs of equal rows = duplicates)
//   order   (M,)  the gradient row of each sorted position (a stable sort keeps the
//                 summation order of torch's index_add_)
//   grads         parts (R_p, dim) of the compute dtype (float32, or float64 for float64
//                 tables), read as their concatenation, never copied together
//   divisor       the world size (gradients are averaged over ranks)
//   hyper         the formula's hyper-parameters, in the table's order
// The caller (graphemb/_native/optimizer.py) checks dtypes, shapes and contiguity; this
// file checks, in one pass before any row is written, that index is sorted and inside the
// table and that order points into the gradients. Runs of distinct rows are updated in
// parallel without races, each row's arithmetic in optim/row_math.h. Float computations
// happen in the compute type C; the weight may be stored in a narrower type W.

#include "common/errors.h"
#include "common/floats.h"
#include "graphemb_kernels.h"
#include "optim/formulas.h"
#include "optim/row_loop.h"
#include "optim/row_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace ge {
namespace {

constexpr int64_t kCheckGrain = int64_t{1} << 16;  // positions a thread checks, at least

struct Call {
  void* weight;
  void* const* state;
  const double* hyper;
};

template <typename W, typename C>
void sgd(const Call& call, const StepRows<C>& step) {
  W* w = static_cast<W*>(call.weight);
  const int64_t dim = step.dim;
  const C lr = static_cast<C>(call.hyper[0]);
  auto update = [&](int64_t row, const C* g) { sgd_row(w + row * dim, g, dim, lr); };
  auto prefetch_row = [&](int64_t row) { prefetch_bytes(w + row * dim, dim * sizeof(W)); };
  for_each_row<C>(step, [&] { return update; }, prefetch_row);
}

template <typename W, typename C>
void adagrad(const Call& call, const StepRows<C>& step) {
  W* w = static_cast<W*>(call.weight);
  C* s = static_cast<C*>(call.state[0]);
  const int64_t dim = step.dim;
  const C lr = static_cast<C>(call.hyper[0]), eps = static_cast<C>(call.hyper[1]);
  auto update = [&](int64_t row, const C* g) {
    adagrad_row(w + row * dim, s + row * dim, g, dim, lr, eps);
  };
  auto prefetch_row = [&](int64_t row) {
    prefetch_bytes(w + row * dim, dim * sizeof(W));
    prefetch_bytes(s + row * dim, dim * sizeof(C));
  };
  for_each_row<C>(step, [&] { return update; }, prefetch_row);
}

template <typename W, typename C>
void rowwise_adagrad(const Call& call, const StepRows<C>& step) {
  W* w = static_cast<W*>(call.weight);
  C* s = static_cast<C*>(call.state[0]);
  const int64_t dim = step.dim;
  const double lr = call.hyper[0], eps = call.hyper[1];
  auto prefetch_row = [&](int64_t row) {
    prefetch_bytes(w + row * dim, dim * sizeof(W));
    prefetch_bytes(s + row, sizeof(C));
  };
  auto update = [&](int64_t row, const C* __restrict__ g) {
    const C sum = s[row] + mean_square(g, dim);
    s[row] = sum;
    const C multiplier = static_cast<C>(lr) / (std::sqrt(sum) + static_cast<C>(eps));
    sgd_row(w + row * dim, g, dim, multiplier);
  };
  for_each_row<C>(step, [&] { return update; }, prefetch_row);
}

// Adam's per-row bias corrections depend on the row's step count only: each thread keeps
// those of the last few counts instead of two std::pow per row (the same values).
template <typename C>
class BiasCorrections {
 public:
  BiasCorrections(double lr, double beta1, double beta2) : lr_(lr), beta1_(beta1), beta2_(beta2) {
    std::fill(std::begin(count_), std::end(count_), -1);
  }
  // (lr / (1 - beta1^t), 1 / sqrt(1 - beta2^t)) in C, computed in double
  std::pair<C, C> operator()(int64_t t) {
    const int64_t slot = t & (kSlots - 1);
    if (count_[slot] != t) {
      const double bias_correction1 = 1.0 - std::pow(beta1_, static_cast<double>(t));
      const double bias_correction2 = 1.0 - std::pow(beta2_, static_cast<double>(t));
      step_size_[slot] = static_cast<C>(lr_ / bias_correction1);
      inv_bc2_sqrt_[slot] = static_cast<C>(1.0 / std::sqrt(bias_correction2));
      count_[slot] = t;
    }
    return {step_size_[slot], inv_bc2_sqrt_[slot]};
  }

 private:
  static constexpr int64_t kSlots = 64;
  double lr_, beta1_, beta2_;
  int64_t count_[kSlots];
  C step_size_[kSlots];
  C inv_bc2_sqrt_[kSlots];
};

template <typename W, typename C>
void adam(const Call& call, const StepRows<C>& step) {
  W* w = static_cast<W*>(call.weight);
  C* m = static_cast<C*>(call.state[0]);
  C* v = static_cast<C*>(call.state[1]);
  int64_t* t = static_cast<int64_t*>(call.state[2]);
  const int64_t dim = step.dim;
  const double lr = call.hyper[0], beta1 = call.hyper[1], beta2 = call.hyper[2];
  AdamCoefficients<C> constants{};
  constants.one_minus_beta1 = static_cast<C>(1.0 - beta1);
  constants.beta2 = static_cast<C>(beta2);
  constants.one_minus_beta2 = static_cast<C>(1.0 - beta2);
  constants.eps = static_cast<C>(call.hyper[3]);
  constants.moments_only = lr == 0.0;
  auto prefetch_row = [&](int64_t row) {
    prefetch_bytes(w + row * dim, dim * sizeof(W));
    prefetch_bytes(m + row * dim, dim * sizeof(C));
    prefetch_bytes(v + row * dim, dim * sizeof(C));
    prefetch_bytes(t + row, sizeof(int64_t));
  };
  auto make_update = [&] {  // one cache of bias corrections per thread
    return [&, corrections = BiasCorrections<C>(lr, beta1, beta2)](int64_t row,
                                                                   const C* g) mutable {
      AdamCoefficients<C> a = constants;
      std::tie(a.step_size, a.inv_bias_correction2_sqrt) = corrections(++t[row]);
      adam_row(w + row * dim, m + row * dim, v + row * dim, g, dim, a);
    };
  };
  for_each_row<C>(step, make_update, prefetch_row);
}

// The first position in [begin, end) whose gradient row is outside the gradients or
// whose row is below the one before it; end if none.
int64_t first_bad_position(const int64_t* idx, const int64_t* ord, int64_t begin, int64_t end,
                           int64_t grad_rows) {
  for (int64_t i = begin; i < end; ++i) {
    // one unsigned comparison catches negative and too large values alike
    if (static_cast<uint64_t>(ord[i]) >= static_cast<uint64_t>(grad_rows)) return i;
    if (i > 0 && idx[i] < idx[i - 1]) return i;
  }
  return end;
}

// Checks, before any row is written, that `index` is sorted and inside the table and that
// `order` points into the gradients: a bad row raises here, naming the first bad position,
// instead of becoming an out-of-bounds write (or a race between two runs of the same row)
// further down. The positions are read in parallel, in contiguous shares.
void check_step_rows(const char* kernel, const int64_t* idx, const int64_t* ord, int64_t n,
                     int64_t table_rows, int64_t grad_rows) {
  std::vector<int64_t> first_bad(std::max(1, num_threads()), n);
  parallel_chunks(0, n, kCheckGrain, [&](int64_t chunk, int64_t begin, int64_t end) {
    const int64_t bad = first_bad_position(idx, ord, begin, end, grad_rows);
    if (bad < end) first_bad[chunk] = bad;
  });
  const int64_t i = *std::min_element(first_bad.begin(), first_bad.end());
  if (i < n) {
    require(static_cast<uint64_t>(ord[i]) < static_cast<uint64_t>(grad_rows), GE_INDEX_ERROR,
            "graphemb_kernels.", kernel, ": order[", i, "] = ", ord[i],
            " is out of range for grads of ", grad_rows, " rows");
    throw KernelError(GE_VALUE_ERROR,
                      message("graphemb_kernels.", kernel,
                              ": index must be sorted ascending, got index[", i - 1,
                              "] = ", idx[i - 1], " > index[", i, "] = ", idx[i]));
  }
  if (n > 0) {  // sorted: the first and the last value bound all others
    require(idx[0] >= 0, GE_INDEX_ERROR, "graphemb_kernels.", kernel, ": index[0] = ", idx[0],
            " is out of range for a table of ", table_rows, " rows");
    require(idx[n - 1] < table_rows, GE_INDEX_ERROR, "graphemb_kernels.", kernel, ": index[",
            n - 1, "] = ", idx[n - 1], " is out of range for a table of ", table_rows, " rows");
  }
}

template <typename W, typename C>
void dispatch_formula(int formula, const Call& call, const StepRows<C>& step) {
  switch (formula) {
    case kSgd: sgd<W, C>(call, step); break;
    case kAdagrad: adagrad<W, C>(call, step); break;
    case kRowwiseAdagrad: rowwise_adagrad<W, C>(call, step); break;
    default: adam<W, C>(call, step); break;
  }
}

}  // namespace
}  // namespace ge

extern "C" int ge_fused_update(int formula, void* weight, int weight_dtype, int64_t rows,
                               int64_t dim, void* const* state, int64_t num_state,
                               const int64_t* index, const int64_t* order, int64_t count,
                               const void* const* grad_parts, const int64_t* grad_part_rows,
                               int64_t num_parts, int compute_dtype, double divisor,
                               const double* hyper, int64_t num_hyper) {
  using namespace ge;
  return guarded([&] {
    const auto& table = formula_table();
    require(formula >= 0 && formula < static_cast<int>(table.size()), GE_VALUE_ERROR,
            "graphemb_kernels.fused_update: formula must be in [0, ", table.size(), "), got ",
            formula);
    const FormulaSpec& spec = table[formula];
    require(num_state == static_cast<int64_t>(spec.state.size()), GE_VALUE_ERROR,
            "graphemb_kernels.", spec.name, ": takes ", spec.state.size(),
            " state table(s), got ", num_state);
    require(num_hyper == static_cast<int64_t>(spec.hyper.size()), GE_VALUE_ERROR,
            "graphemb_kernels.", spec.name, ": takes ", spec.hyper.size(),
            " hyper-parameter(s), got ", num_hyper);
    require(num_parts >= 1, GE_VALUE_ERROR, "graphemb_kernels.", spec.name,
            ": grads must hold at least one tensor, got an empty list");
    require(divisor > 0 && std::isfinite(divisor), GE_VALUE_ERROR, "graphemb_kernels.",
            spec.name, ": divisor must be a positive finite number, got ", divisor);
    int64_t grad_rows = 0;
    for (int64_t p = 0; p < num_parts; ++p) grad_rows += grad_part_rows[p];
    check_step_rows(spec.name, index, order, count, rows, grad_rows);
    // The compute type is float64 for float64 tables and float32 for every other.
    const bool wide = weight_dtype == GE_FLOAT64;
    require(compute_dtype == (wide ? GE_FLOAT64 : GE_FLOAT32), GE_TYPE_ERROR,
            "graphemb_kernels.", spec.name, ": grads must be ", wide ? "float64" : "float32",
            " for a table of this dtype (the compute dtype)");
    const Call call{weight, state, hyper};
    with_storage_type(weight_dtype, "weight", [&](auto w) {
      using W = decltype(w);
      using C = std::conditional_t<std::is_same_v<W, double>, double, float>;
      const GradRows<C> grads(grad_parts, grad_part_rows, num_parts, dim);
      const StepRows<C> step{index, order, count, grads, dim, divisor};
      dispatch_formula<W, C>(formula, call, step);
    });
  });
}
