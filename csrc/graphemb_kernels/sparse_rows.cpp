// Fused CPU kernels of graphemb's sparse optimizers.
//
// One pass per updated row: sum the row's gradient contributions (duplicates in the batch,
// or rows pushed by several ranks), divide by the world size, and apply the optimizer's
// formula to the weight and state rows in place -- instead of the pure-torch path's
// coalesce -> gather -> ~7 elementwise passes -> scatter, which moves every row through
// memory about 30 times. The formulas are those of graphemb/optim/functional.py (the
// reference, also used on GPUs and when this module is absent).
//
// Input of every kernel:
//   index   (M,)  int64: table rows, sorted ascending (runs of equal rows = duplicates)
//   order   (M,)  int64: grads row of each sorted position (a stable sort keeps the
//                 summation order of torch's index_add_)
//   grads   (R, dim) compute dtype (float32, or float64 for float64 tables)
//   divisor       the world size (gradients are averaged over ranks)
// Tables are contiguous; rows of different runs are distinct, so runs are updated in
// parallel without races.
//
// Every kernel checks what it is given before it touches a row -- devices, dtypes,
// contiguity, shapes, and in one serial pass over index and order: index sorted and inside
// the table, order inside grads -- and raises (IndexError, ValueError or TypeError in
// Python) naming the bad value; a rejected call changes nothing. The per-row loops
// themselves check nothing. Each call is a torch.profiler span "graphemb_kernels::<name>".

#include <torch/extension.h>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

// ------------------------------------------------------------------ checks of the inputs
// torch's Python name of a dtype ("int64", not c10's "Long"), for error messages.
std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(type);
  }
}

void check_cpu(const char* kernel, const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.device().is_cpu(), "graphemb_kernels.", kernel, ": ", name,
                    " must be a CPU tensor, got one on ", t.device());
}

void check_contiguous(const char* kernel, const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.is_contiguous(), "graphemb_kernels.", kernel, ": ", name,
                    " must be contiguous, got sizes ", t.sizes(), " with strides ", t.strides());
}

void check_dtype(const char* kernel, const at::Tensor& t, const char* name, at::ScalarType expected,
                 const char* why) {
  TORCH_CHECK_TYPE(t.scalar_type() == expected, "graphemb_kernels.", kernel, ": ", name,
                   " must be ", dtype_name(expected), " (", why, "), got ",
                   dtype_name(t.scalar_type()));
}

// A tensor the kernel reads or writes: on the CPU, contiguous, of `dim` dimensions.
void check_tensor(const char* kernel, const at::Tensor& t, const char* name, int64_t dim) {
  check_cpu(kernel, t, name);
  TORCH_CHECK_VALUE(t.dim() == dim, "graphemb_kernels.", kernel, ": ", name, " must have ", dim,
                    " dimension(s), got shape ", t.sizes());
  check_contiguous(kernel, t, name);
}

// weight (N, dim) floating; index, order (M,) int64; grads (R, dim) float32 or float64.
void check(const char* kernel, const at::Tensor& weight, const at::Tensor& index,
           const at::Tensor& order, const at::Tensor& grads, double divisor) {
  check_tensor(kernel, weight, "weight", 2);
  check_tensor(kernel, index, "index", 1);
  check_tensor(kernel, order, "order", 1);
  check_tensor(kernel, grads, "grads", 2);
  const auto w = weight.scalar_type();
  TORCH_CHECK_TYPE(w == at::kFloat || w == at::kDouble || w == at::kHalf || w == at::kBFloat16,
                   "graphemb_kernels.", kernel,
                   ": weight must be float32, float64, float16 or bfloat16, got ", dtype_name(w));
  check_dtype(kernel, index, "index", at::kLong, "row numbers");
  check_dtype(kernel, order, "order", at::kLong, "rows of grads");
  const auto g = grads.scalar_type();
  TORCH_CHECK_TYPE(g == at::kFloat || g == at::kDouble, "graphemb_kernels.", kernel,
                   ": grads must be float32 or float64 (the compute dtype), got ", dtype_name(g));
  TORCH_CHECK_VALUE(index.numel() == order.numel(), "graphemb_kernels.", kernel,
                    ": index and order must have the same length, got ", index.numel(), " and ",
                    order.numel());
  TORCH_CHECK_VALUE(grads.size(1) == weight.size(1), "graphemb_kernels.", kernel,
                    ": grads must have the weight's ", weight.size(1), " columns, got shape ",
                    grads.sizes());
  TORCH_CHECK_VALUE(divisor > 0 && std::isfinite(divisor), "graphemb_kernels.", kernel,
                    ": divisor must be a positive finite number, got ", divisor);
}

// Per-row optimizer state: (N, dim) or (N,) like the weight, in the compute dtype.
void check_state(const char* kernel, const at::Tensor& state, const char* name,
                 const at::Tensor& weight, bool per_element, at::ScalarType dtype,
                 const char* why) {
  check_tensor(kernel, state, name, per_element ? 2 : 1);
  const bool rows_match = state.size(0) == weight.size(0);
  const bool columns_match = !per_element || state.size(1) == weight.size(1);
  TORCH_CHECK_VALUE(rows_match && columns_match, "graphemb_kernels.", kernel, ": ", name,
                    " must have shape ", per_element ? weight.sizes() : weight.sizes().slice(0, 1),
                    " to match the weight, got ", state.sizes());
  check_dtype(kernel, state, name, dtype, why);
}

// Start of every run of equal values in sorted `index`, plus a final `n` -- after checking,
// in the same single pass, that `index` is sorted and inside the table and that `order`
// points into grads: a bad row from a caller raises here instead of becoming an
// out-of-bounds write (or a race between two runs of the same row) further down.
std::vector<int64_t> checked_run_starts(const char* kernel, const at::Tensor& index,
                                        const at::Tensor& order, int64_t table_rows,
                                        int64_t grad_rows) {
  const int64_t n = index.numel();
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t* ord = order.data_ptr<int64_t>();
  std::vector<int64_t> starts;
  starts.reserve(n + 1);
  for (int64_t i = 0; i < n; ++i) {
    // one unsigned comparison catches negative and too large values alike
    if (static_cast<uint64_t>(ord[i]) >= static_cast<uint64_t>(grad_rows)) {
      TORCH_CHECK_INDEX(false, "graphemb_kernels.", kernel, ": order[", i, "] = ", ord[i],
                        " is out of range for grads of ", grad_rows, " rows");
    }
    if (i == 0 || idx[i] != idx[i - 1]) {
      if (i > 0 && idx[i] < idx[i - 1]) {
        TORCH_CHECK_VALUE(false, "graphemb_kernels.", kernel, ": index must be sorted ascending, ",
                          "got index[", i - 1, "] = ", idx[i - 1], " > index[", i, "] = ", idx[i]);
      }
      starts.push_back(i);
    }
  }
  starts.push_back(n);
  if (n > 0) {  // sorted: the first and the last value bound all others
    TORCH_CHECK_INDEX(idx[0] >= 0, "graphemb_kernels.", kernel, ": index[0] = ", idx[0],
                      " is out of range for a table of ", table_rows, " rows");
    TORCH_CHECK_INDEX(idx[n - 1] < table_rows, "graphemb_kernels.", kernel, ": index[", n - 1,
                      "] = ", idx[n - 1], " is out of range for a table of ", table_rows,
                      " rows");
  }
  return starts;
}

// Brings `nbytes` at `p` towards the cache ahead of use: rows are scattered over tables of
// hundreds of MB, so without it every row waits on DRAM (measured: -7% time at N=1M).
inline void prefetch(const void* p, int64_t nbytes) {
  const char* bytes = static_cast<const char*>(p);
  for (int64_t offset = 0; offset < nbytes; offset += 64) __builtin_prefetch(bytes + offset, 1);
}

constexpr int64_t kPrefetchRuns = 2;  // rows ahead (measured at N=1M, 2 threads: 1-2 best, 8 worse)

// Calls update(row, summed_grad) once per distinct row, in parallel over rows;
// prefetch_row(row) is called a few rows ahead of update(row, ...). `starts`: the runs of
// checked_run_starts.
template <typename C, typename Update, typename Prefetch>
void for_each_row(const std::vector<int64_t>& starts, const at::Tensor& index,
                  const at::Tensor& order, const at::Tensor& grads, double divisor,
                  Update update, Prefetch prefetch_row) {
  const int64_t dim = grads.size(1);
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t* ord = order.data_ptr<int64_t>();
  const C* g = grads.data_ptr<C>();
  const int64_t runs = static_cast<int64_t>(starts.size()) - 1;
  const C div = static_cast<C>(divisor);
  at::parallel_for(0, runs, 256, [&](int64_t begin, int64_t end) {
    std::vector<C> sum(dim);
    for (int64_t k = begin; k < end; ++k) {
      if (k + kPrefetchRuns < end) {
        const int64_t ahead = starts[k + kPrefetchRuns];
        prefetch(g + ord[ahead] * dim, dim * static_cast<int64_t>(sizeof(C)));
        prefetch_row(idx[ahead]);
      }
      const C* first = g + ord[starts[k]] * dim;
      for (int64_t j = 0; j < dim; ++j) sum[j] = first[j];
      for (int64_t i = starts[k] + 1; i < starts[k + 1]; ++i) {
        const C* more = g + ord[i] * dim;
        for (int64_t j = 0; j < dim; ++j) sum[j] += more[j];
      }
      if (divisor != 1.0) {
        for (int64_t j = 0; j < dim; ++j) sum[j] /= div;
      }
      update(idx[starts[k]], sum.data());
    }
  });
}

// Float computations happen in C; the weight may be stored in a narrower type W.
template <typename W, typename C>
inline C load(const W& w) { return static_cast<C>(w); }

}  // namespace

void sgd_(at::Tensor weight, at::Tensor index, at::Tensor order, at::Tensor grads,
          double divisor, double lr) {
  RECORD_FUNCTION("graphemb_kernels::sgd_", std::vector<c10::IValue>());
  check("sgd_", weight, index, order, grads, divisor);
  const auto starts = checked_run_starts("sgd_", index, order, weight.size(0), grads.size(0));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, weight.scalar_type(), "sgd_", [&] {
    using W = scalar_t;
    AT_DISPATCH_FLOATING_TYPES(grads.scalar_type(), "sgd_grad", [&] {
      using C = scalar_t;
      W* w = weight.data_ptr<W>();
      const int64_t dim = weight.size(1);
      const C clr = static_cast<C>(lr);
      auto update = [&](int64_t row, const C* g) {
        W* __restrict__ wr = w + row * dim;
        for (int64_t j = 0; j < dim; ++j) wr[j] = static_cast<W>(load<W, C>(wr[j]) - clr * g[j]);
      };
      auto prefetch_row = [&](int64_t row) { prefetch(w + row * dim, dim * sizeof(W)); };
      for_each_row<C>(starts, index, order, grads, divisor, update, prefetch_row);
    });
  });
}

void adagrad_(at::Tensor weight, at::Tensor state_sum, at::Tensor index, at::Tensor order,
              at::Tensor grads, double divisor, double lr, double eps) {
  RECORD_FUNCTION("graphemb_kernels::adagrad_", std::vector<c10::IValue>());
  check("adagrad_", weight, index, order, grads, divisor);
  check_state("adagrad_", state_sum, "state_sum", weight, /*per_element=*/true,
              grads.scalar_type(), "the dtype of grads");
  const auto starts = checked_run_starts("adagrad_", index, order, weight.size(0), grads.size(0));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, weight.scalar_type(), "adagrad_", [&] {
    using W = scalar_t;
    AT_DISPATCH_FLOATING_TYPES(grads.scalar_type(), "adagrad_grad", [&] {
      using C = scalar_t;
      W* w = weight.data_ptr<W>();
      C* s = state_sum.data_ptr<C>();
      const int64_t dim = weight.size(1);
      const C clr = static_cast<C>(lr), ceps = static_cast<C>(eps);
      auto update = [&](int64_t row, const C* g) {
        W* __restrict__ wr = w + row * dim;
        C* __restrict__ sr = s + row * dim;
        for (int64_t j = 0; j < dim; ++j) {
          const C sum = sr[j] + g[j] * g[j];
          sr[j] = sum;
          wr[j] = static_cast<W>(load<W, C>(wr[j]) - clr * g[j] / (std::sqrt(sum) + ceps));
        }
      };
      auto prefetch_row = [&](int64_t row) {
        prefetch(w + row * dim, dim * sizeof(W));
        prefetch(s + row * dim, dim * sizeof(C));
      };
      for_each_row<C>(starts, index, order, grads, divisor, update, prefetch_row);
    });
  });
}

void rowwise_adagrad_(at::Tensor weight, at::Tensor state_sum, at::Tensor index,
                      at::Tensor order, at::Tensor grads, double divisor, double lr,
                      double eps) {
  RECORD_FUNCTION("graphemb_kernels::rowwise_adagrad_", std::vector<c10::IValue>());
  check("rowwise_adagrad_", weight, index, order, grads, divisor);
  check_state("rowwise_adagrad_", state_sum, "state_sum", weight, /*per_element=*/false,
              grads.scalar_type(), "the dtype of grads");
  const auto starts =
      checked_run_starts("rowwise_adagrad_", index, order, weight.size(0), grads.size(0));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, weight.scalar_type(), "rowwise_", [&] {
    using W = scalar_t;
    AT_DISPATCH_FLOATING_TYPES(grads.scalar_type(), "rowwise_grad", [&] {
      using C = scalar_t;
      W* w = weight.data_ptr<W>();
      C* s = state_sum.data_ptr<C>();
      const int64_t dim = weight.size(1);
      auto prefetch_row = [&](int64_t row) {
        prefetch(w + row * dim, dim * sizeof(W));
        prefetch(s + row, sizeof(C));
      };
      auto update = [&](int64_t row, const C* g) {
        C squares = 0;
        for (int64_t j = 0; j < dim; ++j) squares += g[j] * g[j];
        const C sum = s[row] + squares / static_cast<C>(dim);
        s[row] = sum;
        const C multiplier = static_cast<C>(lr) / (std::sqrt(sum) + static_cast<C>(eps));
        W* __restrict__ wr = w + row * dim;
        for (int64_t j = 0; j < dim; ++j) wr[j] = static_cast<W>(load<W, C>(wr[j]) - multiplier * g[j]);
      };
      for_each_row<C>(starts, index, order, grads, divisor, update, prefetch_row);
    });
  });
}

void adam_(at::Tensor weight, at::Tensor exp_avg, at::Tensor exp_avg_sq, at::Tensor step,
           at::Tensor index, at::Tensor order, at::Tensor grads, double divisor, double lr,
           double beta1, double beta2, double eps) {
  RECORD_FUNCTION("graphemb_kernels::adam_", std::vector<c10::IValue>());
  check("adam_", weight, index, order, grads, divisor);
  check_state("adam_", exp_avg, "exp_avg", weight, /*per_element=*/true, grads.scalar_type(),
              "the dtype of grads");
  check_state("adam_", exp_avg_sq, "exp_avg_sq", weight, /*per_element=*/true,
              grads.scalar_type(), "the dtype of grads");
  check_state("adam_", step, "step", weight, /*per_element=*/false, at::kLong, "step counts");
  const auto starts = checked_run_starts("adam_", index, order, weight.size(0), grads.size(0));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, weight.scalar_type(), "adam_", [&] {
    using W = scalar_t;
    AT_DISPATCH_FLOATING_TYPES(grads.scalar_type(), "adam_grad", [&] {
      using C = scalar_t;
      W* w = weight.data_ptr<W>();
      C* m = exp_avg.data_ptr<C>();
      C* v = exp_avg_sq.data_ptr<C>();
      int64_t* t = step.data_ptr<int64_t>();
      const int64_t dim = weight.size(1);
      const C b2 = static_cast<C>(beta2);
      const C one_minus_b1 = static_cast<C>(1.0 - beta1), one_minus_b2 = static_cast<C>(1.0 - beta2);
      const C ceps = static_cast<C>(eps);
      auto prefetch_row = [&](int64_t row) {
        prefetch(w + row * dim, dim * sizeof(W));
        prefetch(m + row * dim, dim * sizeof(C));
        prefetch(v + row * dim, dim * sizeof(C));
        prefetch(t + row, sizeof(int64_t));
      };
      auto update = [&](int64_t row, const C* g) {
        const int64_t count = ++t[row];
        C* __restrict__ mr = m + row * dim;
        C* __restrict__ vr = v + row * dim;
        W* __restrict__ wr = w + row * dim;
        for (int64_t j = 0; j < dim; ++j) {
          mr[j] += one_minus_b1 * (g[j] - mr[j]);                  // lerp, as torch's Adam
          vr[j] = vr[j] * b2 + one_minus_b2 * g[j] * g[j];
        }
        if (lr == 0.0) return;
        // per-row bias corrections in double, as graphemb.optim.functional.adam_rows_
        const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(count));
        const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(count));
        const C step_size = static_cast<C>(lr / bias_correction1);
        const C inv_bc2_sqrt = static_cast<C>(1.0 / std::sqrt(bias_correction2));
        for (int64_t j = 0; j < dim; ++j) {
          const C denom = std::sqrt(vr[j]) * inv_bc2_sqrt + ceps;
          wr[j] = static_cast<W>(load<W, C>(wr[j]) - step_size * mr[j] / denom);
        }
      };
      for_each_row<C>(starts, index, order, grads, divisor, update, prefetch_row);
    });
  });
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.doc() = "Fused CPU kernels of graphemb's sparse optimizers";
  module.def("sgd_", &sgd_, "SGD on the rows of sorted index");
  module.def("adagrad_", &adagrad_, "Adagrad on the rows of sorted index");
  module.def("rowwise_adagrad_", &rowwise_adagrad_, "Row-wise Adagrad on the rows of sorted index");
  module.def("adam_", &adam_, "Adam with per-row steps on the rows of sorted index");
}
