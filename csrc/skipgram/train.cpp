// word2vec's skip-gram with negative sampling on random walks, Hogwild.
//
// What word2vec.c (and gensim's sg=1, negative=K path) does, one walk at a time:
//
//   1. the walk's tokens are subsampled: a node is kept with probability keep(node), from
//      its count (graphemb.skipgram.keep_probabilities, gensim's formula); one uniform draw
//      per token whose keep < 1, none otherwise; the kept tokens are closed up;
//   2. for each position t of the kept walk (the predicted node w, output row syn1[w]):
//      a reduced window r uniform in 1..window (one draw), then for each context c at
//      t - r .. t + r (c != t, inside the walk), in that order, the input row syn0[c] is
//      trained against syn1[w] (label 1) and K noise nodes (label 0) drawn from
//      unigram ** 0.75 (one key each, noise.h); a noise node equal to w is skipped, as in
//      word2vec.c. For each (target, label):
//          f = syn0[c] . syn1[target];  g = (label - sigmoid(f)) * alpha
//          neu1e += g * syn1[target];   syn1[target] += g * syn0[c]
//      and after the K + 1 targets syn0[c] += neu1e.
//
// Which contexts share a draw of noise nodes is the config's `sharing`: 0 (word2vec) draws
// K for every context; 1 draws K once per position, right after its radius, for all the
// contexts of its window (HogBatch, BlazingText). Everything else is the same: each
// context is still trained in turn against the position's targets as they are after the
// contexts before it. Per token, word2vec reads about 2 * (window + 1) / 2 * K noise rows
// (55 at window 10, K 5), shared draws K (5): once the tables outgrow the caches, those
// reads are the cost per token (measured by benchmarks/bench_deepwalk_scale.py). With a
// noise pool (noise.h) the noise nodes are taken from a small per-thread pool of fresh
// draws, each serving noise_reuse of them: their rows stay in the caches.
//
// A walk's draws are made before its rows are trained, while the walk before it trains
// (plan.h: the same draws in the same order), so that the loop knows which rows come next
// and prefetches them (loop.h).
//
// The K + 1 targets of one context are drawn first; when they are distinct nodes (nearly
// always) no score depends on another's update, so their K + 1 dot products run side by
// side and their updates in one pass over the rows (lanes.h), with the same
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
// 0.0001); word2vec.c's, lr * 1e-4, gives 0.4 % less learning and cost 0.4-0.6 points of
// F1 on a dense 1000-node graph.
//
// The output rows may be narrower than float32 (syn1_format: float24 or bfloat16): every row
// read into float32, the same arithmetic, each value written back rounded stochastically
// (output_rows.h), so that a row costs 3/4 or 1/2 of the memory and of the bytes to fetch.
// The input rows stay float32.
//
// Threads split the walks into contiguous ranges and update the shared tables
// without locks (Hogwild, as word2vec's threads do). They are the kernels' threads
// (common/parallel.h: torch's OpenMP threads where torch loaded them), which live on
// between calls: a run of one call per chunk of walks starts no thread of its own, and a
// thread never waits for another's range. Thread i draws from its own
// splitmix64 stream whose state starts at mix(seed ^ (i * 0x9E3779B97F4A7C15)), mix being
// splitmix64's output function; with one thread the result is deterministic (and
// reproducible by a float64 reference, tests/skipgram_reference.py). A uniform
// integer below n is the high 64 bits of x * n (x the 64-bit draw), a uniform number in
// [0, 1) is (x >> 11) * 2^-53.
//
// Counts (non-finite dot products seen, (context, target) products computed): the caller
// stops the run on the first non-finite one (a diverged run writes NaN everywhere later).

#include "common/errors.h"
#include "common/parallel.h"
#include "graphemb_kernels.h"
#include "skipgram/loop.h"
#include "skipgram/tables.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ge::skipgram {
namespace {

// The per-thread loop, compiled for CPUs with AVX2 and FMA (8 floats a vector op, the
// products of a context side by side: about 2.5x the speed of one 4-float product at a
// time) and for any other CPU, each for every format of the output rows (output_rows.h).
template <typename Format>
__attribute__((target("avx2,fma"))) void train_range_wide(const Tables& t, int64_t first,
                                                          int64_t last, uint64_t seed,
                                                          int thread, Workspace* space,
                                                          std::atomic<int64_t>* done,
                                                          Counts* counts) {
  Loop<8, Format>::train_range(t, first, last, seed, thread, space, done, counts);
}

template <typename Format>
void train_range_narrow(const Tables& t, int64_t first, int64_t last, uint64_t seed, int thread,
                        Workspace* space, std::atomic<int64_t>* done, Counts* counts) {
  Loop<4, Format>::train_range(t, first, last, seed, thread, space, done, counts);
}

using TrainRange = void (*)(const Tables&, int64_t, int64_t, uint64_t, int, Workspace*,
                            std::atomic<int64_t>*, Counts*);

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

template <typename Format>
TrainRange train_range_of(bool wide) {
  return wide ? train_range_wide<Format> : train_range_narrow<Format>;
}

// vector_width 0: the widest loop this CPU runs; 4 or 8: that one (tests run both); for
// output rows in syn1_format (0 float32, 1 bfloat16, 2 float24).
TrainRange train_range_for(int64_t vector_width, int64_t syn1_format) {
  require(vector_width == 0 || vector_width == 4 || vector_width == 8, GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: vector_width must be 0 (the widest), 4 or 8, got ",
          vector_width);
  bool wide = cpu_has_avx2_fma();
  require(vector_width != 8 || wide, GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: vector_width 8 needs a CPU with AVX2 and FMA, "
          "which this one lacks");
  wide = wide && vector_width != 4;
  if (syn1_format == 1) return train_range_of<BFloat16Rows>(wide);
  if (syn1_format == 2) return train_range_of<Float24Rows>(wide);
  return train_range_of<Float32Rows>(wide);
}

// Every id in [low, num_nodes), checked before any row is written.
void check_ids(const int64_t* ids, int64_t count, int64_t low, int64_t num_nodes,
               const char* name) {
  if (count == 0) return;
  const auto [smallest, largest] = std::minmax_element(ids, ids + count);
  require(*smallest >= low && *largest < num_nodes, GE_INDEX_ERROR,
          "graphemb_kernels.skipgram_train: ", name, " holds ids in [", *smallest, ", ",
          *largest, "], outside [0, ", num_nodes, ")", low < 0 ? " (or -1)" : "");
}

void check_noise(const ge_skipgram_config& c);

void check(const ge_skipgram_config& c) {
  require(c.window >= 1 && c.negatives >= 0 && c.threads >= 1 && c.total_walks >= 1 &&
              c.walks_before >= 0 && c.hold_walks >= 1 && c.dim >= 1,
          GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: need window >= 1, negatives >= 0, threads >= 1, "
          "total_walks >= 1, walks_before >= 0, hold_walks >= 1, dim >= 1; "
          "got ", c.window, ", ", c.negatives, ", ", c.threads, ", ", c.total_walks, ", ",
          c.walks_before, ", ", c.hold_walks, ", ", c.dim);
  require(c.noise_pool >= 0 && c.noise_reuse >= 1 && (c.noise_pool > 0 || c.noise_reuse == 1),
          GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: need noise_pool >= 0 and noise_reuse >= 1 (1 "
          "without a pool), got ", c.noise_pool, " and ", c.noise_reuse);
  require(c.syn1_format >= 0 && c.syn1_format <= 2, GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: syn1_format must be 0 (float32), 1 (bfloat16) or 2 "
          "(float24), got ", c.syn1_format);
  require(c.sharing == 0 || c.sharing == 1, GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: sharing must be 0 (per pair) or 1 (per position), "
          "got ", c.sharing);
  require(c.final_rate > 0.0 && c.final_rate <= 1.0, GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: final_rate must be in (0, 1], got ", c.final_rate);
  require((c.count_indptr != nullptr) != (c.count_values != nullptr) &&
              c.subsample_threshold >= 0.0,
          GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: need the counts as an indptr or as values (one of "
          "them) and a subsample threshold >= 0, got threshold ", c.subsample_threshold);
  check_ids(c.walks, c.num_walks * c.length, -1, c.num_nodes, "walks");
  check_noise(c);
}

// The noise as tables.h describes it. Slots are a graph's neighbour lists, checked when the
// caller built them (one pass over the edges per run, not per call).
void check_noise(const ge_skipgram_config& c) {
  const bool slots = c.noise_slots != nullptr;
  const bool alias = c.noise_columns > 0 && c.noise_node != nullptr && c.noise_keep != nullptr &&
                     c.noise_alias != nullptr;
  const bool rejection = c.noise_lack_bound > 0.0;
  require(slots ? c.noise_slot_count > 0 && c.count_indptr != nullptr && c.noise_floor > 0.0 &&
                      c.noise_alias_share >= 0.0 && c.noise_alias_share < 1.0 &&
                      !(alias && rejection) && std::isfinite(c.noise_lack_bound) &&
                      (alias || rejection) == (c.noise_alias_share > 0.0)
                : alias && c.noise_lack_bound == 0.0,
          GE_VALUE_ERROR,
          "graphemb_kernels.skipgram_train: need the noise as an alias table of columns >= 1, or "
          "as slots >= 1 with the counts as an indptr, a floor > 0 and an alias share in [0, 1), "
          "above 0 exactly with an alias table or a lack bound > 0 (not both); got ",
          c.noise_columns, " columns, ", c.noise_slot_count, " slots, floor ", c.noise_floor,
          ", share ", c.noise_alias_share, ", lack bound ", c.noise_lack_bound);
  if (alias) {
    check_ids(c.noise_node, c.noise_columns, 0, c.num_nodes, "noise_nodes");
    check_ids(c.noise_alias, c.noise_columns, 0, c.num_nodes, "noise_alias");
  }
}

int64_t syn1_row_bytes(int64_t format, int64_t dim) {
  if (format == 1) return OutputLanes<4, BFloat16Rows>::row_bytes(dim);
  if (format == 2) return OutputLanes<4, Float24Rows>::row_bytes(dim);
  return OutputLanes<4, Float32Rows>::row_bytes(dim);
}

void train(const ge_skipgram_config& c, int64_t* result) {
  check(c);
  const NodeCounts node_counts{c.count_indptr, c.count_values};
  const NoiseTable noise{c.noise_node,        c.noise_keep,
                         c.noise_alias,       static_cast<uint64_t>(c.noise_columns),
                         c.noise_slots,       static_cast<uint64_t>(c.noise_slot_count),
                         c.noise_floor,       c.noise_alias_share,
                         static_cast<uint64_t>(c.num_nodes), c.noise_lack_bound,
                         std::pow(c.noise_floor, 0.25)};
  const Tables tables{c.walks,        c.length,        c.syn0,
                      c.syn1,         syn1_row_bytes(c.syn1_format, c.dim), c.dim, node_counts,
                      c.subsample_threshold, noise,    c.window,
                      c.negatives,    c.lr,            c.final_rate,
                      c.walks_before, c.total_walks,   c.hold_walks,
                      static_cast<Sharing>(c.sharing), c.noise_pool, c.noise_reuse};
  const int64_t count = c.num_walks;
  const int64_t used = std::max<int64_t>(1, std::min<int64_t>(c.threads, count));
  const TrainRange train_range = train_range_for(c.vector_width, c.syn1_format);
  std::atomic<int64_t> done{0};
  std::vector<Counts> counts(used);
  WorkspaceLease spaces(used, c.length, c.window, c.negatives + 1, c.dim);
  run_on_threads(used, [&](int64_t i) {
    train_range(tables, count * i / used, count * (i + 1) / used, c.seed, static_cast<int>(i),
                 &spaces[i], &done, &counts[i]);
  });
  result[0] = result[1] = 0;
  for (const auto& part : counts) {
    result[0] += part.nonfinite;
    result[1] += part.products;
  }
}

}  // namespace
}  // namespace ge::skipgram

extern "C" int ge_skipgram_train(const ge_skipgram_config* config, int64_t* counts) {
  return ge::guarded([&] { ge::skipgram::train(*config, counts); });
}
