// word2vec's skip-gram with negative sampling on random walks, Hogwild (skipgram.cpp).
//
// What word2vec.c (and gensim's sg=1, negative=K path) does, one walk at a time:
//
//   1. the walk's tokens are subsampled: a node is kept with probability keep[node]
//      (graphemb.skipgram.keep_probabilities, gensim's formula); one uniform draw per
//      token whose keep < 1, none otherwise; the kept tokens are closed up;
//   2. for each position t of the kept walk (the predicted node w, output row syn1[w]):
//      a reduced window r uniform in 1..window (one draw), then for each context c at
//      t - r .. t + r (c != t, inside the walk), in that order, the input row syn0[c] is
//      trained against syn1[w] (label 1) and K noise nodes (label 0) drawn from the alias
//      table of unigram ** 0.75 (two draws each: a column, then its coin); a noise node
//      equal to w is skipped, as in word2vec.c. For each (target, label):
//          f = syn0[c] . syn1[target];  g = (label - sigmoid(f)) * alpha
//          neu1e += g * syn1[target];   syn1[target] += g * syn0[c]
//      and after the K + 1 targets syn0[c] += neu1e.
//
// The K + 1 targets of one context are drawn first; when they are distinct nodes (nearly
// always) no score depends on another's update, so their K + 1 dot products run side by
// side and their updates in one pass over the rows (skipgram_rows.inc), with the same
// result; when a node is drawn twice the targets are trained one after the other. For up
// to 8 targets and rows of whole vectors the loop is compiled per target count, its
// accumulators in registers (about 1.3x the speed of the loop over a run-time count).
//
// The sigmoid is exact (1 / (1 + exp(-f)) in float32), not word2vec's 1000-entry table
// clipped at |f| = 6: as cheap here (one exp per K + 1 dot products of D floats) and
// without the table's steps.
//
// alpha decays linearly from lr to lr * final_rate with the walks done and is held for
// blocks of hold_walks walks: lr * max(1 - (1 - final_rate) * p, final_rate),
// p = floor(done / hold_walks) * hold_walks / total, done counting the
// walks of earlier calls (walks_before) and those finished by every thread of this call (an
// atomic counter), read when a walk starts. word2vec.c recomputes alpha every 10,000 words
// a thread trains and gensim once per job of 10,000 words (batch_words); the caller passes
// hold_walks = 10,000 / walk length. Lowering the rate every walk instead gives about 1 %
// less learning over a run, which on a small dense graph costs several F1 points. The last
// rate the caller passes is gensim's (final_rate 1 / 250: alpha 0.025 down to min_alpha
// 0.0001); word2vec.c's, lr * 1e-4, gives 0.4 % less learning and cost 0.4-0.6 points of F1 on a dense 1000-node graph.
//
// Threads split the walks into contiguous ranges and update the shared float32 tables
// without locks (Hogwild, as word2vec's threads do). Thread i draws from its own
// splitmix64 stream whose state starts at mix(seed ^ (i * 0x9E3779B97F4A7C15)), mix being
// splitmix64's output function; with one thread the result is deterministic (and
// reproducible by a float64 reference, tests/unit/test_skipgram_compiled.py). A uniform
// integer below n is the high 64 bits of x * n (x the 64-bit draw), a uniform number in
// [0, 1) is (x >> 11) * 2^-53.
//
// Returns (non-finite dot products seen, (context, target) products computed): the caller
// stops the run on the first non-finite one (a diverged run writes NaN everywhere later).

#include "skipgram.h"
#include "splitmix.h"

#include <atomic>
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using splitmix::kGamma;
using splitmix::mix;
using splitmix::SplitMix64;

// One column of the noise alias table, in one 32-byte block (one cache line per draw
// instead of one per array). A draw's coin (x >> 11) * 2^-53 < keep, x its 64-bit draw,
// is the integer test (x >> 11) < threshold with threshold = ceil(keep * 2^53): the same
// outcome for every draw, without a conversion to double.
struct alignas(32) NoiseColumn {
  uint64_t threshold;
  int64_t node;
  int64_t alias;
};

struct Tables {
  const int64_t* walks;
  int64_t length;
  float* syn0;
  float* syn1;
  int64_t dim;
  const double* keep;
  const NoiseColumn* noise;
  uint64_t noise_size;
  int64_t window;
  int64_t negatives;
  double lr;
  double final_rate;  // the last learning rate as a share of lr
  int64_t walks_before;
  int64_t total_walks;
  int64_t hold_walks;
};

struct Counts {
  int64_t nonfinite = 0;
  int64_t products = 0;
};

// The per-thread loop, compiled twice: for CPUs with AVX2 and FMA (8 floats a vector op, the
// products of a context side by side: about 2.5x the speed of one 4-float product at a
// time here) and for any other CPU.
namespace vector8 {
#pragma GCC push_options
#pragma GCC target("avx2,fma")
constexpr int kLanes = 8;
#include "skipgram_rows.inc"
#pragma GCC pop_options
}  // namespace vector8

namespace vector4 {
constexpr int kLanes = 4;
#include "skipgram_rows.inc"
}  // namespace vector4

using TrainRange = void (*)(const Tables&, int64_t, int64_t, uint64_t, int,
                            std::atomic<int64_t>*, Counts*);

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

// vector_width 0: the widest loop this CPU runs; 4 or 8: that one (tests run both).
TrainRange train_range_for(int64_t vector_width) {
  TORCH_CHECK_VALUE(vector_width == 0 || vector_width == 4 || vector_width == 8,
                    "graphemb_kernels.skipgram_train: vector_width must be 0 (the widest), 4 or "
                    "8, got ", vector_width);
  const bool wide = cpu_has_avx2_fma();
  TORCH_CHECK_VALUE(vector_width != 8 || wide,
                    "graphemb_kernels.skipgram_train: vector_width 8 needs a CPU with AVX2 and "
                    "FMA, which this one lacks");
  return vector_width != 4 && wide ? vector8::train_range : vector4::train_range;
}

void check_tensor(const at::Tensor& t, const char* name, at::ScalarType dtype, int64_t dims) {
  TORCH_CHECK_TYPE(t.scalar_type() == dtype, "graphemb_kernels.skipgram_train: ", name,
                   " must be ", dtype, ", got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.device().is_cpu() && t.is_contiguous() && t.dim() == dims,
                    "graphemb_kernels.skipgram_train: ", name, " must be a contiguous CPU tensor "
                    "of ", dims, " dimension(s), got shape ", t.sizes(), " on ", t.device());
}

}  // namespace

std::tuple<int64_t, int64_t> skipgram_train(const at::Tensor& walks, const at::Tensor& syn0,
                                            const at::Tensor& syn1, const at::Tensor& keep,
                                            const at::Tensor& noise_nodes,
                                            const at::Tensor& noise_keep,
                                            const at::Tensor& noise_alias, int64_t window,
                                            int64_t negatives, double lr, double final_rate,
                                            int64_t walks_before, int64_t total_walks,
                                            int64_t hold_walks, int64_t threads,
                                            uint64_t seed, int64_t vector_width) {
  check_tensor(walks, "walks", at::kLong, 2);
  check_tensor(syn0, "syn0", at::kFloat, 2);
  check_tensor(syn1, "syn1", at::kFloat, 2);
  check_tensor(keep, "keep", at::kDouble, 1);
  check_tensor(noise_nodes, "noise_nodes", at::kLong, 1);
  check_tensor(noise_keep, "noise_keep", at::kDouble, 1);
  check_tensor(noise_alias, "noise_alias", at::kLong, 1);
  const int64_t num_nodes = syn0.size(0);
  TORCH_CHECK_VALUE(syn1.sizes() == syn0.sizes(), "graphemb_kernels.skipgram_train: syn1 ",
                    syn1.sizes(), " and syn0 ", syn0.sizes(), " differ in shape");
  TORCH_CHECK_VALUE(keep.size(0) == num_nodes, "graphemb_kernels.skipgram_train: keep has ",
                    keep.size(0), " entries for ", num_nodes, " nodes");
  const int64_t columns = noise_nodes.size(0);
  TORCH_CHECK_VALUE(columns > 0 && noise_keep.size(0) == columns &&
                        noise_alias.size(0) == columns,
                    "graphemb_kernels.skipgram_train: the alias table's three arrays must have "
                    "the same positive length, got ",
                    columns, ", ", noise_keep.size(0), ", ", noise_alias.size(0));
  TORCH_CHECK_VALUE(window >= 1 && negatives >= 0 && threads >= 1 && total_walks >= 1 &&
                        walks_before >= 0 && hold_walks >= 1,
                    "graphemb_kernels.skipgram_train: need window >= 1, negatives >= 0, "
                    "threads >= 1, total_walks >= 1, walks_before >= 0, hold_walks >= 1; got ",
                    window, ", ", negatives, ", ", threads, ", ", total_walks, ", ",
                    walks_before, ", ", hold_walks);
  TORCH_CHECK_VALUE(final_rate > 0.0 && final_rate <= 1.0,
                    "graphemb_kernels.skipgram_train: final_rate must be in (0, 1], got ",
                    final_rate);
  // Every id is checked before any row is written.
  for (const auto& [t, name] : {std::pair{walks, "walks"}, std::pair{noise_nodes, "noise_nodes"},
                                std::pair{noise_alias, "noise_alias"}}) {
    if (t.numel() == 0) continue;
    const int64_t low = t.min().item<int64_t>(), high = t.max().item<int64_t>();
    TORCH_CHECK_INDEX(low >= (t.is_same(walks) ? -1 : 0) && high < num_nodes,
                      "graphemb_kernels.skipgram_train: ", name, " holds ids in [", low, ", ",
                      high, "], outside [0, ", num_nodes, ")", t.is_same(walks) ? " (or -1)" : "");
  }
  const int64_t count = walks.size(0);
  std::vector<NoiseColumn> noise(columns);
  const int64_t* nodes = noise_nodes.data_ptr<int64_t>();
  const double* coins = noise_keep.data_ptr<double>();
  const int64_t* aliases = noise_alias.data_ptr<int64_t>();
  for (int64_t c = 0; c < columns; ++c) {
    const double keep = std::clamp(coins[c], 0.0, 1.0);
    noise[c] = {static_cast<uint64_t>(std::ceil(keep * 0x1.0p53)), nodes[c], aliases[c]};
  }
  Tables tables{walks.data_ptr<int64_t>(),
                walks.size(1),
                syn0.data_ptr<float>(),
                syn1.data_ptr<float>(),
                syn0.size(1),
                keep.data_ptr<double>(),
                noise.data(),
                static_cast<uint64_t>(columns),
                window,
                negatives,
                lr,
                final_rate,
                walks_before,
                total_walks,
                hold_walks};
  const int64_t used = std::max<int64_t>(1, std::min<int64_t>(threads, count));
  const TrainRange train_range = train_range_for(vector_width);
  std::atomic<int64_t> done{0};
  std::vector<Counts> counts(used);
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < used; ++i) {
    pool.emplace_back(train_range, std::cref(tables), count * i / used, count * (i + 1) / used,
                      seed, static_cast<int>(i), &done, &counts[i]);
  }
  train_range(tables, 0, count / used, seed, 0, &done, &counts[0]);
  for (auto& worker : pool) worker.join();
  int64_t nonfinite = 0, products = 0;
  for (const auto& c : counts) {
    nonfinite += c.nonfinite;
    products += c.products;
  }
  return {nonfinite, products};
}
