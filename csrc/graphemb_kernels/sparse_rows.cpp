// Fused CPU kernels of graphemb's sparse optimizers.
//
// One pass per updated row: sum the row's gradient contributions (duplicates in the batch,
// or rows pushed by several ranks), divide by the world size, and apply the optimizer's
// formula to the weight and state rows in place -- instead of the pure-torch path's
// coalesce -> gather -> ~7 elementwise passes -> scatter, which moves every row through
// memory about 30 times. The formulas are those of graphemb/optim/functional.py (the
// reference, also used on GPUs and when this module is absent).
//
// One entry point, fused_update(formula, weight, state, index, order, grads, divisor,
// hyper), the interface of every fused backend (graphemb.optim.kernels on CPU,
// graphemb.optim.triton_update on GPUs):
//   formula       position of the formula in this module's table (formulas())
//   state         the formula's state tables, in the registry's order
//   index   (M,)  int64: table rows, sorted ascending (runs of equal rows = duplicates)
//   order   (M,)  int64: grads row of each sorted position (a stable sort keeps the
//                 summation order of torch's index_add_)
//   grads   parts (R_p, dim) of the compute dtype (float32, or float64 for float64
//                 tables), read as one (R, dim) table: their concatenation, never copied
//                 together (the rows that ranks push through shared memory stay where
//                 the senders wrote them)
//   divisor       the world size (gradients are averaged over ranks)
//   hyper         the formula's hyper-parameters, in the registry's order
// kFormulas below states what each formula takes; formulas() returns it so that Python
// uses a kernel only where its entry equals the registry's, formula by formula, by name
// (graphemb/optim/kernels.py).
// Tables are contiguous; rows of different runs are distinct, so runs are updated in
// parallel without races.
//
// Every call checks what it is given before it touches a row (sparse_rows_checks.inc) --
// devices, dtypes, contiguity, shapes, and in one serial pass over index and order: index
// sorted and inside the table, order inside grads -- and raises (IndexError, ValueError or
// TypeError in Python) naming the bad value; a rejected call changes nothing. The per-row loops
// themselves check nothing. Each call is a torch.profiler span "graphemb_kernels::<name>_".

#include <torch/extension.h>

#include <pybind11/functional.h>

#include "aggregate.h"
#include "csc.h"
#include "dropout.h"
#include "edge_list.h"
#include "sampler.h"
#include "skipgram.h"
#include "tasks.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace {

// ------------------------------------------------------------------ the formula table
// Shapes of a per-row state table, as graphemb.optim.functional names them.
enum class Kind { kElement, kRow, kCount };

struct StateSpec {
  const char* key;
  Kind kind;
};

struct FormulaSpec {
  const char* name;
  std::vector<StateSpec> state;
  std::vector<const char*> hyper;
};

enum FormulaId : int64_t { kSgd = 0, kAdagrad = 1, kRowwiseAdagrad = 2, kAdam = 3 };

const std::vector<FormulaSpec>& formula_table() {
  static const std::vector<FormulaSpec> table = {
      {"sgd", {}, {"lr"}},
      {"adagrad", {{"sum", Kind::kElement}}, {"lr", "eps"}},
      {"rowwise_adagrad", {{"sum", Kind::kRow}}, {"lr", "eps"}},
      {"adam",
       {{"exp_avg", Kind::kElement}, {"exp_avg_sq", Kind::kElement}, {"step", Kind::kCount}},
       {"lr", "beta1", "beta2", "eps"}},
  };
  return table;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kElement: return "element";
    case Kind::kRow: return "row";
    default: return "count";
  }
}

#include "sparse_rows_checks.inc"

// ------------------------------------------------------------------ the row loop
// Brings `nbytes` at `p` towards the cache ahead of use: rows are scattered over tables of
// hundreds of MB, so without it every row waits on DRAM.
inline void prefetch(const void* p, int64_t nbytes) {
  const char* bytes = static_cast<const char*>(p);
  for (int64_t offset = 0; offset < nbytes; offset += 64) __builtin_prefetch(bytes + offset, 1);
}

constexpr int64_t kPrefetchRuns = 4;  // rows ahead (N=1M, D=128: 4 best of 2-8; into L2 only: worse)
constexpr int64_t kRunsPerBlock = 1024;  // rows a thread takes at a time

// The gradient parts read as one table: row k of their concatenation, found by a scan of
// the few part ends (one part per sender rank at most).
template <typename C>
class GradRows {
 public:
  explicit GradRows(const std::vector<at::Tensor>& parts) : dim_(parts.front().size(1)) {
    int64_t end = 0;
    for (const auto& part : parts) {
      bases_.push_back(part.data_ptr<C>());
      starts_.push_back(end);
      end += part.size(0);
      ends_.push_back(end);
    }
  }
  const C* row(int64_t k) const {
    size_t p = 0;
    while (k >= ends_[p]) ++p;  // k < the last end: checked_run_starts
    return bases_[p] + (k - starts_[p]) * dim_;
  }

 private:
  int64_t dim_;
  std::vector<const C*> bases_;
  std::vector<int64_t> starts_, ends_;
};

// Calls update(row, summed_grad) once per distinct row, in parallel over rows, with
// update = make_update() made once per thread (it may keep per-thread state);
// prefetch_row(row) is called a few rows ahead of update(row, ...). `starts`: the runs of
// checked_run_starts. Threads take blocks of rows as tasks from a shared counter
// (tasks.h), so that a thread the OS preempts (a busy machine) delays only its block.
template <typename C, typename MakeUpdate, typename Prefetch>
void for_each_row(const std::vector<int64_t>& starts, const at::Tensor& index,
                  const at::Tensor& order, const std::vector<at::Tensor>& grads,
                  double divisor, MakeUpdate make_update, Prefetch prefetch_row) {
  const int64_t dim = grads.front().size(1);
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t* ord = order.data_ptr<int64_t>();
  const GradRows<C> g(grads);
  const int64_t runs = static_cast<int64_t>(starts.size()) - 1;
  if (runs <= 0) return;
  const C div = static_cast<C>(divisor);
  const int64_t blocks = (runs + kRunsPerBlock - 1) / kRunsPerBlock;
  for_each_task_with(blocks, [&] {
    return [&, sum = std::vector<C>(dim), update = make_update()](int64_t block) mutable {
      const int64_t begin = block * kRunsPerBlock;
      const int64_t end = std::min(runs, begin + kRunsPerBlock);
      for (int64_t k = begin; k < end; ++k) {
        if (k + kPrefetchRuns < runs) {
          const int64_t ahead = starts[k + kPrefetchRuns];
          prefetch(g.row(ord[ahead]), dim * static_cast<int64_t>(sizeof(C)));
          prefetch_row(idx[ahead]);
        }
        const int64_t first = starts[k], last = starts[k + 1];
        const C* row_grad = g.row(ord[first]);
        if (last - first > 1 || divisor != 1.0) {  // else: the gradient row as it is
          for (int64_t j = 0; j < dim; ++j) sum[j] = row_grad[j];
          for (int64_t i = first + 1; i < last; ++i) {
            const C* more = g.row(ord[i]);
            for (int64_t j = 0; j < dim; ++j) sum[j] += more[j];
          }
          if (divisor != 1.0) {
            for (int64_t j = 0; j < dim; ++j) sum[j] /= div;
          }
          row_grad = sum.data();
        }
        update(idx[first], row_grad);
      }
    };
  });
}

// ------------------------------------------------------------------ the formulas
// Each takes the checked tables and calls for_each_row with its per-row update. Float
// computations happen in C; the weight may be stored in a narrower type W.
struct Call {
  const at::Tensor& weight;
  const std::vector<at::Tensor>& state;
  const at::Tensor& index;
  const at::Tensor& order;
  const std::vector<at::Tensor>& grads;
  double divisor;
  const std::vector<double>& hyper;
  const std::vector<int64_t>& starts;
};

template <typename W, typename C>
void sgd(const Call& call) {
  W* w = call.weight.data_ptr<W>();
  const int64_t dim = call.weight.size(1);
  const C lr = static_cast<C>(call.hyper[0]);
  auto update = [&](int64_t row, const C* __restrict__ g) {
    W* __restrict__ wr = w + row * dim;
#pragma omp simd
    for (int64_t j = 0; j < dim; ++j) wr[j] = static_cast<W>(static_cast<C>(wr[j]) - lr * g[j]);
  };
  auto prefetch_row = [&](int64_t row) { prefetch(w + row * dim, dim * sizeof(W)); };
  for_each_row<C>(call.starts, call.index, call.order, call.grads, call.divisor,
                  [&] { return update; }, prefetch_row);
}

template <typename W, typename C>
void adagrad(const Call& call) {
  W* w = call.weight.data_ptr<W>();
  C* s = call.state[0].data_ptr<C>();
  const int64_t dim = call.weight.size(1);
  const C lr = static_cast<C>(call.hyper[0]), eps = static_cast<C>(call.hyper[1]);
  auto update = [&](int64_t row, const C* __restrict__ g) {
    W* __restrict__ wr = w + row * dim;
    C* __restrict__ sr = s + row * dim;
#pragma omp simd
    for (int64_t j = 0; j < dim; ++j) {
      const C sum = sr[j] + g[j] * g[j];
      sr[j] = sum;
      wr[j] = static_cast<W>(static_cast<C>(wr[j]) - lr * g[j] / (std::sqrt(sum) + eps));
    }
  };
  auto prefetch_row = [&](int64_t row) {
    prefetch(w + row * dim, dim * sizeof(W));
    prefetch(s + row * dim, dim * sizeof(C));
  };
  for_each_row<C>(call.starts, call.index, call.order, call.grads, call.divisor,
                  [&] { return update; }, prefetch_row);
}

template <typename W, typename C>
void rowwise_adagrad(const Call& call) {
  W* w = call.weight.data_ptr<W>();
  C* s = call.state[0].data_ptr<C>();
  const int64_t dim = call.weight.size(1);
  const double lr = call.hyper[0], eps = call.hyper[1];
  auto prefetch_row = [&](int64_t row) {
    prefetch(w + row * dim, dim * sizeof(W));
    prefetch(s + row, sizeof(C));
  };
  auto update = [&](int64_t row, const C* __restrict__ g) {
    C squares = 0;
    for (int64_t j = 0; j < dim; ++j) squares += g[j] * g[j];
    const C sum = s[row] + squares / static_cast<C>(dim);
    s[row] = sum;
    const C multiplier = static_cast<C>(lr) / (std::sqrt(sum) + static_cast<C>(eps));
    W* __restrict__ wr = w + row * dim;
#pragma omp simd
    for (int64_t j = 0; j < dim; ++j) {
      wr[j] = static_cast<W>(static_cast<C>(wr[j]) - multiplier * g[j]);
    }
  };
  for_each_row<C>(call.starts, call.index, call.order, call.grads, call.divisor,
                  [&] { return update; }, prefetch_row);
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
void adam(const Call& call) {
  W* w = call.weight.data_ptr<W>();
  C* m = call.state[0].data_ptr<C>();
  C* v = call.state[1].data_ptr<C>();
  int64_t* t = call.state[2].data_ptr<int64_t>();
  const int64_t dim = call.weight.size(1);
  const double lr = call.hyper[0], beta1 = call.hyper[1], beta2 = call.hyper[2];
  const C b2 = static_cast<C>(beta2);
  const C one_minus_b1 = static_cast<C>(1.0 - beta1), one_minus_b2 = static_cast<C>(1.0 - beta2);
  const C eps = static_cast<C>(call.hyper[3]);
  auto prefetch_row = [&](int64_t row) {
    prefetch(w + row * dim, dim * sizeof(W));
    prefetch(m + row * dim, dim * sizeof(C));
    prefetch(v + row * dim, dim * sizeof(C));
    prefetch(t + row, sizeof(int64_t));
  };
  auto make_update = [&] {  // one cache of bias corrections per thread
    return [&, corrections = BiasCorrections<C>(lr, beta1, beta2)](
               int64_t row, const C* __restrict__ g) mutable {
      const int64_t count = ++t[row];
      C* __restrict__ mr = m + row * dim;
      C* __restrict__ vr = v + row * dim;
      W* __restrict__ wr = w + row * dim;
      if (lr == 0.0) {  // moments only, as functional.adam_rows_
#pragma omp simd
        for (int64_t j = 0; j < dim; ++j) {
          mr[j] += one_minus_b1 * (g[j] - mr[j]);
          vr[j] = vr[j] * b2 + one_minus_b2 * g[j] * g[j];
        }
        return;
      }
      const auto [step_size, inv_bc2_sqrt] = corrections(count);
#pragma omp simd
      for (int64_t j = 0; j < dim; ++j) {  // one pass over m, v and w
        const C mj = mr[j] + one_minus_b1 * (g[j] - mr[j]);  // lerp, as torch's Adam
        const C vj = vr[j] * b2 + one_minus_b2 * g[j] * g[j];
        mr[j] = mj;
        vr[j] = vj;
        const C denom = std::sqrt(vj) * inv_bc2_sqrt + eps;
        wr[j] = static_cast<W>(static_cast<C>(wr[j]) - step_size * mj / denom);
      }
    };
  };
  for_each_row<C>(call.starts, call.index, call.order, call.grads, call.divisor, make_update,
                  prefetch_row);
}

}  // namespace

// The rows of a step sorted for fused_update: (index, order) with index = ids ascending and
// order[i] the position in ids of index[i], equal ids in their order of appearance --
// exactly torch.sort(ids, stable=True). A serial LSD radix sort over the bits that
// num_rows needs (two passes of 10 bits for a million rows): a step's ids sort in about a
// millisecond without a parallel region, which on a busy machine costs more than the sort.
std::tuple<at::Tensor, at::Tensor> sort_rows(const at::Tensor& ids, int64_t num_rows) {
  const std::string kernel = "sort_rows";
  RECORD_FUNCTION("graphemb_kernels::sort_rows", std::vector<c10::IValue>());
  check_tensor(kernel, ids, "ids", 1);
  check_dtype(kernel, ids, "ids", at::kLong, "row numbers");
  TORCH_CHECK_VALUE(num_rows >= 0, "graphemb_kernels.sort_rows: num_rows must be >= 0, got ",
                    num_rows);
  const int64_t n = ids.numel();
  const int64_t* in = ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<uint64_t>(in[i]) >= static_cast<uint64_t>(num_rows)) {
      TORCH_CHECK_INDEX(false, "graphemb_kernels.sort_rows: ids[", i, "] = ", in[i],
                        " is out of range for a table of ", num_rows, " rows");
    }
  }
  at::Tensor index = at::empty({n}, ids.options());
  at::Tensor order = at::empty({n}, ids.options());
  int64_t* out_keys = index.data_ptr<int64_t>();
  int64_t* out_positions = order.data_ptr<int64_t>();
  int bits = 0;
  while (bits < 63 && (int64_t{1} << bits) < num_rows) ++bits;
  constexpr int kMaxRadixBits = 11;
  const int passes = (bits + kMaxRadixBits - 1) / kMaxRadixBits;
  if (passes == 0) {  // at most one row: every id is 0
    for (int64_t i = 0; i < n; ++i) {
      out_keys[i] = in[i];
      out_positions[i] = i;
    }
    return {index, order};
  }
  const int radix_bits = (bits + passes - 1) / passes;
  const int64_t buckets = int64_t{1} << radix_bits;
  std::vector<int64_t> keys[2] = {std::vector<int64_t>(passes > 1 ? n : 0),
                                  std::vector<int64_t>(passes > 2 ? n : 0)};
  std::vector<int64_t> positions[2] = {std::vector<int64_t>(passes > 1 ? n : 0),
                                       std::vector<int64_t>(passes > 2 ? n : 0)};
  std::vector<int64_t> count(buckets);
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = pass * radix_bits;
    const int64_t* src_keys = pass == 0 ? in : keys[(pass - 1) % 2].data();
    const int64_t* src_positions = pass == 0 ? nullptr : positions[(pass - 1) % 2].data();
    const bool last = pass == passes - 1;
    int64_t* dst_keys = last ? out_keys : keys[pass % 2].data();
    int64_t* dst_positions = last ? out_positions : positions[pass % 2].data();
    std::fill(count.begin(), count.end(), 0);
    for (int64_t i = 0; i < n; ++i) ++count[(src_keys[i] >> shift) & (buckets - 1)];
    int64_t offset = 0;
    for (int64_t b = 0; b < buckets; ++b) {
      const int64_t c = count[b];
      count[b] = offset;
      offset += c;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t key = src_keys[i];
      const int64_t slot = count[(key >> shift) & (buckets - 1)]++;
      dst_keys[slot] = key;
      dst_positions[slot] = src_positions == nullptr ? i : src_positions[i];
    }
  }
  return {index, order};
}

// formula: position in formula_table() (Python maps registry names to it); state and
// hyper in the order the registry gives them.
void fused_update(int64_t formula, at::Tensor weight, std::vector<at::Tensor> state,
                  at::Tensor index, at::Tensor order, std::vector<at::Tensor> grads,
                  double divisor, std::vector<double> hyper) {
  const auto& table = formula_table();
  TORCH_CHECK_VALUE(formula >= 0 && formula < static_cast<int64_t>(table.size()),
                    "graphemb_kernels.fused_update: formula must be in [0, ", table.size(),
                    "), got ", formula);
  const FormulaSpec& spec = table[formula];
  const std::string kernel = spec.name;
  RECORD_FUNCTION("graphemb_kernels::" + kernel + "_", std::vector<c10::IValue>());
  const int64_t grad_rows = check(kernel, weight, index, order, grads, divisor);
  const auto compute = grads.front().scalar_type();
  check_state(kernel, spec, state, weight, compute);
  TORCH_CHECK_VALUE(hyper.size() == spec.hyper.size(), "graphemb_kernels.", kernel, ": takes ",
                    spec.hyper.size(), " hyper-parameter(s), got ", hyper.size());
  const auto starts = checked_run_starts(kernel, index, order, weight.size(0), grad_rows);
  const Call call{weight, state, index, order, grads, divisor, hyper, starts};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, weight.scalar_type(), "weight", [&] {
    using W = scalar_t;
    AT_DISPATCH_FLOATING_TYPES(compute, "grads", [&] {
      using C = scalar_t;
      switch (formula) {
        case kSgd: sgd<W, C>(call); break;
        case kAdagrad: adagrad<W, C>(call); break;
        case kRowwiseAdagrad: rowwise_adagrad<W, C>(call); break;
        case kAdam: adam<W, C>(call); break;
        default: TORCH_CHECK(false, "graphemb_kernels.fused_update: no kernel for ", kernel);
      }
    });
  });
}

// The formula table: [(name, [(state key, kind)], [hyper-parameter names])], by position.
std::vector<std::tuple<std::string, std::vector<std::pair<std::string, std::string>>,
                       std::vector<std::string>>>
formulas() {
  std::vector<std::tuple<std::string, std::vector<std::pair<std::string, std::string>>,
                         std::vector<std::string>>>
      result;
  for (const auto& spec : formula_table()) {
    std::vector<std::pair<std::string, std::string>> state;
    for (const auto& s : spec.state) state.emplace_back(s.key, kind_name(s.kind));
    result.emplace_back(spec.name, state,
                        std::vector<std::string>(spec.hyper.begin(), spec.hyper.end()));
  }
  return result;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.doc() = "Fused CPU kernels of graphemb: sparse optimizer updates, CSC construction";
  module.attr("API_VERSION") = 3;  // 3: grads is a list of parts
  // csc_from_edges takes an edge_ids that holds src and dst (reads every edge first)
  module.attr("CSC_EDGE_IDS_MAY_HOLD_EDGES") = true;
  module.def("fused_update", &fused_update,
             "Sum each run's gradient rows (order indexes the concatenation of the grads "
             "parts), divide by divisor, apply the formula in place",
             pybind11::arg("formula"), pybind11::arg("weight"), pybind11::arg("state"),
             pybind11::arg("index"), pybind11::arg("order"), pybind11::arg("grads"),
             pybind11::arg("divisor"), pybind11::arg("hyper"));
  module.def("sort_rows", &sort_rows, "Stable sort of row ids: (sorted ids, their positions)",
             pybind11::arg("ids"), pybind11::arg("num_rows"));
  module.def("csc_from_edges", &csc_from_edges,
             "CSC arrays (indptr, indices, edge_ids) of an edge list by a counting sort; "
             "allocate(S) returns the (indices, edge_ids) to fill",
             pybind11::arg("src"), pybind11::arg("dst"), pybind11::arg("num_nodes"),
             pybind11::arg("undirected"), pybind11::arg("allocate"));
  module.def("parse_integer_edges", &parse_integer_edges,
             "Edge lines of integer node names after skip_lines, parsed on all threads "
             "(parts=0) or in that many parts: "
             "(edges (2, E), weights or None, smallest id, largest id, whether the ids are all of "
             "0 .. largest), or None for anything "
             "that is not a plain integer edge list",
             pybind11::arg("path"), pybind11::arg("skip_lines"), pybind11::arg("delimiter"),
             pybind11::arg("columns"), pybind11::arg("weighted"), pybind11::arg("parts") = 0,
             pybind11::call_guard<pybind11::gil_scoped_release>());
  bind_sampler(module);
  bind_dropout(module);
  bind_aggregate(module);
  module.def("skipgram_train", &skipgram_train,
             "word2vec's skip-gram with negative sampling over walks, Hogwild on threads, "
             "in place on syn0 and syn1: (non-finite products, products)",
             pybind11::arg("walks"), pybind11::arg("syn0"), pybind11::arg("syn1"),
             pybind11::arg("keep"), pybind11::arg("noise_nodes"), pybind11::arg("noise_keep"),
             pybind11::arg("noise_alias"), pybind11::arg("window"), pybind11::arg("negatives"),
             pybind11::arg("lr"), pybind11::arg("final_rate"), pybind11::arg("walks_before"),
             pybind11::arg("total_walks"), pybind11::arg("hold_walks"), pybind11::arg("threads"),
             pybind11::arg("seed"), pybind11::arg("vector_width") = 0,
             pybind11::call_guard<pybind11::gil_scoped_release>());
  module.def("formulas", &formulas, "The formula table: (name, state, hyper-parameters)");
}
