/* graphemb's compiled CPU kernels: the C interface of the shared library.
 *
 * Plain C types only -- pointers, sizes, strides, codes -- so that the library depends on
 * no Python and no torch: one build serves every torch. Python (graphemb/_native/) checks
 * devices, dtypes, shapes and contiguity, passes data pointers, and loads the library
 * with ctypes; the functions here check what depends on the data (ids in range, sorted
 * rows) before they write anything.
 *
 * Every function that can fail returns a ge_status; on failure, ge_last_error() holds the
 * message for the calling thread (until its next call). A function that writes outputs
 * whose sizes depend on the data asks the caller for memory through a ge_allocate
 * callback, so that outputs are the caller's own tensors (no copy).
 */
#ifndef GRAPHEMB_KERNELS_H_
#define GRAPHEMB_KERNELS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GE_API __attribute__((visibility("default")))

/* Raised by the Python bindings when the library and the bindings disagree. */
#define GE_ABI_VERSION 13

typedef enum {
  GE_OK = 0,
  GE_VALUE_ERROR = 1,
  GE_INDEX_ERROR = 2,
  GE_TYPE_ERROR = 3,
  GE_MEMORY_ERROR = 4,
  GE_RUNTIME_ERROR = 5,
  GE_CALLBACK_ERROR = 6, /* a ge_allocate callback failed: the caller holds the reason */
  GE_DECLINED = 7        /* not a failure: the input is outside what the kernel reads */
} ge_status;

typedef enum {
  GE_FLOAT32 = 0,
  GE_FLOAT64 = 1,
  GE_FLOAT16 = 2,
  GE_BFLOAT16 = 3,
  GE_INT32 = 4,
  GE_INT64 = 5
} ge_dtype;

/* Memory for output `slot` of `count` elements (the slot names their dtype): writes the
 * address of contiguous memory to *out and returns 0, or returns nonzero on failure. */
typedef int (*ge_allocate)(void* context, int64_t slot, int64_t count, void** out);

/* ------------------------------------------------------------------ the library */
GE_API int ge_abi_version(void);
GE_API const char* ge_last_error(void);
/* The widest SIMD level the CPU runs that the kernels were compiled for ("avx2+fma",
 * "sse2", "neon", "scalar"). */
GE_API const char* ge_simd_level(void);
/* Threads of the parallel loops (graphemb passes torch.get_num_threads()). */
GE_API void ge_set_num_threads(int threads);
GE_API int ge_num_threads(void);
/* Whether the parallel loops may run on the OpenMP runtime already in the process (torch's;
 * default 1), else on threads of the library's own; returns the previous setting. */
GE_API int ge_set_openmp(int allowed);
/* 1 when the parallel loops run on the process's OpenMP runtime now. */
GE_API int ge_uses_openmp(void);

/* ------------------------------------------------------------------ sparse optimizers */
GE_API int ge_formula_count(void);
/* "name;state key:kind,...;hyper,..." of formula `formula` (kinds: element, row, count). */
GE_API const char* ge_formula_spec(int formula);
/* One pass per distinct row of sorted `index` (count,): the sum of its gradient rows
 * (order[i] indexes the concatenation of the grad parts), divided by `divisor`, applied by
 * the formula to weight (rows, dim) of weight_dtype and to its state tables in place. */
GE_API int ge_fused_update(int formula, void* weight, int weight_dtype, int64_t rows,
                           int64_t dim, void* const* state, int64_t num_state,
                           const int64_t* index, const int64_t* order, int64_t count,
                           const void* const* grad_parts, const int64_t* grad_part_rows,
                           int64_t num_parts, int compute_dtype, double divisor,
                           const double* hyper, int64_t num_hyper);
/* torch.sort(ids, stable=True) of n row ids in [0, num_rows): values into index, positions
 * into order (n each). */
GE_API int ge_sort_rows(const int64_t* ids, int64_t n, int64_t num_rows, int64_t* index,
                        int64_t* order);

/* ------------------------------------------------------------------ tables */
/* Rows ids[0 .. n) of a table of `rows` rows of `row_bytes` bytes copied into out (n rows),
 * in order; every id is checked against `rows` before anything is written. */
GE_API int ge_gather_rows(const void* table, int64_t rows, int64_t row_bytes,
                          const int64_t* ids, int64_t n, void* out);

/* ------------------------------------------------------------------ graphs */
/* CSC arrays of an edge list: indptr (num_nodes + 1,) written here; slot 0 of allocate:
 * indices, slot 1: edge ids (int64, one per stored edge). src and dst are read with
 * strides (in elements); the edge ids may be the memory of src and dst. */
GE_API int ge_csc_from_edges(const int64_t* src, int64_t src_stride, const int64_t* dst,
                             int64_t dst_stride, int64_t num_edges, int64_t num_nodes,
                             int undirected, int64_t* indptr, ge_allocate allocate,
                             void* context);
/* Integer edge lines of a file: slot 0 (int64, 2 * lines): sources then targets; slot 1
 * (float64, lines): weights when weighted. result: {edges, smallest id, largest id, dense}
 * (dense: the ids are exactly 0 .. largest). GE_DECLINED for anything that is not a plain
 * integer edge list (the caller reads the file itself). delimiter 0: runs of blanks. */
GE_API int ge_parse_integer_edges(const char* path, int64_t skip_lines, char delimiter,
                                  int columns, int weighted, int64_t parts,
                                  ge_allocate allocate, void* context, int64_t* result);

/* ------------------------------------------------------------------ sampling */
/* Up to fanout distinct in-edges of every seed: slots 0, 1, 2 (int64, E each): sources,
 * seed positions, CSC positions. */
GE_API int ge_sample_layer(const int64_t* indptr, const int64_t* indices, int64_t num_nodes,
                           const int64_t* seeds, int64_t num_seeds, int64_t fanout,
                           uint64_t key, ge_allocate allocate, void* context);
/* Every layer, seeds outwards. Layer l asks for slots 4l (row pointers), 4l + 1 (edge
 * index, 2E), 4l + 2 (CSC positions, E), 4l + 3 (source nodes), all int64. marker
 * (num_nodes,) of marker_dtype (int32 or int64), all -1, comes back all -1. */
GE_API int ge_sample_blocks(const int64_t* indptr, const int64_t* indices, int64_t num_nodes,
                            const int64_t* seeds, int64_t num_seeds, const int64_t* fanouts,
                            int64_t num_layers, uint64_t key, void* marker, int marker_dtype,
                            int64_t scan_fraction, ge_allocate allocate, void* context);
/* One walk of walk_length steps from each of the num_walks start nodes (walk i's at
 * start[i * start_stride], start_stride >= 0) along the out-edges of the CSR graph
 * (indptr, indices; rows sorted when p or q is not 1), into out (num_walks,
 * walk_length + 1), row-major: the start, then the steps, PAD (-1) after a node the walk
 * cannot leave. start may be out's first column (start == out, start_stride ==
 * walk_length + 1): each walk reads its start before it writes its row, and writes no
 * other row. Weighted: cumulative (E + 1,) prefix sums of the weights and last (N,) each
 * node's last edge of positive weight; both null when unweighted. node2vec's biased
 * steps unless p == q == 1. */
GE_API int ge_random_walks(const int64_t* indptr, const int64_t* indices, const double* cumulative,
                           const int64_t* last, int64_t num_nodes, const int64_t* start,
                           int64_t start_stride, int64_t num_walks, int64_t walk_length,
                           double p, double q, uint64_t key, int64_t* out);
/* Positions start .. start + count - 1 of the seeded pseudo-random order of 0 .. num_nodes - 1
 * (graphemb.sampling.permutation.RandomOrder: a Feistel network of `rounds` rounds keyed by
 * keys[0 .. rounds) (each below 2**32) on half_bits-bit halves, 0 and 1 swapped after it when
 * odd, cycle walking into [0, num_nodes)), into out[0], out[out_stride], ...,
 * out[(count - 1) * out_stride] (out_stride >= 1). */
GE_API int ge_random_order(int64_t num_nodes, int64_t half_bits, const int64_t* keys,
                           int64_t rounds, int odd, int64_t start, int64_t count, int64_t* out,
                           int64_t out_stride);

/* ------------------------------------------------------------------ layers */
/* Dropout's mask (ge_dropout_masked_scale's threshold, scale and key) on the rows a kernel
 * reads (forward) or writes (backward), element index = row * features + column;
 * threshold in [0, 2^16). */
typedef struct {
  uint32_t threshold;
  double scale;
  uint64_t key;
} ge_dropout_mask;
/* out (rows, features) = CSR (crow, col, values or NULL) x dense (dense_rows, features),
 * summed or averaged (mean) per row; dtype float32 or float64 for all. With mask (NULL:
 * none), dense's elements are dropped as they are read; with relu, they are read as
 * max(x, 0) first. With with_self, out is (rows, 2 features): each row's aggregate, then
 * dense's row of the same index (read the same way); rows <= dense_rows. With sources >= 0
 * the product's dense matrix is (sources, features) instead, its row i at dense_ids[i] of
 * dense, each id in [0, dense_rows): col, with_self and the mask's element positions refer
 * to those rows. With sources < 0, dense itself (dense_ids ignored). */
GE_API int ge_csr_aggregate(const int64_t* crow, int64_t rows, const int64_t* col,
                            int64_t entries, const void* values, const void* dense,
                            int64_t dense_rows, int64_t features, int dtype, int mean,
                            const ge_dropout_mask* mask, void* out, int with_self, int relu,
                            const int64_t* dense_ids, int64_t sources);
/* Its backward: out (out_rows, features) = the transpose of that CSR matrix (values 1,
 * or 1 / the row's entry count with mean) x grad (rows, features), plus addend
 * (addend_rows, features; NULL for none) on the first addend_rows rows of out; with mask
 * (NULL: none), then dropped. With paired, grad is (rows, 2 features), the gradient of a
 * with_self output: its first half is multiplied as above and its second half added to
 * the first rows of out (addend NULL, rows <= out_rows). With relu_input (out_rows,
 * features; NULL for none), the values the forward read through a ReLU: out is then 0
 * wherever relu_input is not above 0. */
GE_API int ge_csr_aggregate_transposed(const int64_t* crow, int64_t rows, const int64_t* col,
                                       int64_t entries, const void* grad, int64_t features,
                                       int dtype, int mean, const void* addend,
                                       int64_t addend_rows, const ge_dropout_mask* mask,
                                       void* out, int64_t out_rows, int paired,
                                       const void* relu_input);
/* out[i] = x[i] * scale where a 16-bit hash of (key, i) >= threshold, else 0; n elements;
 * threshold in [0, 2^16). */
GE_API int ge_dropout_masked_scale(const void* x, void* out, int64_t n, int dtype,
                                   uint32_t threshold, double scale, uint64_t key);

/* ------------------------------------------------------------------ skip-gram */
typedef struct {
  const int64_t* walks; /* (num_walks, length), -1 pads a short walk */
  int64_t num_walks;
  int64_t length;
  float* syn0; /* (num_nodes, dim): input rows */
  void* syn1;  /* (num_nodes, dim) output rows in syn1_format */
  int64_t num_nodes;
  int64_t dim;
  /* Each node's count in the walks (up to a constant): count_indptr's differences (a
     graph's in-degrees; (num_nodes + 1,)), or count_values ((num_nodes,)) if it is NULL */
  const int64_t* count_indptr;
  const double* count_values;
  double subsample_threshold; /* keep a token of count c w.p. min(1, (sqrt(c/s) + 1) s/c); 0: all */
  /* The noise distribution, count ** 0.75 (skipgram/tables.h): an alias table (noise_node,
     noise_keep, noise_alias; noise_columns); or noise_slot_count slots holding each node
     count(v) times, a slot's node accepted w.p. min(1, (noise_floor / count(v)) ** 0.25),
     and what the nodes below the floor lack drawn instead w.p. noise_alias_share: from the
     alias table, or (noise_lack_bound > 0, no alias table) by rejection from uniform nodes,
     a node of count c in (0, floor) accepted w.p. (c ** 0.75 floor ** 0.25 - c) / bound */
  const int64_t* noise_node;
  const double* noise_keep;
  const int64_t* noise_alias;
  int64_t noise_columns;
  const int64_t* noise_slots; /* or NULL */
  int64_t noise_slot_count;
  double noise_floor;
  double noise_alias_share;
  double noise_lack_bound; /* 0: the alias table */
  int64_t window;
  int64_t negatives;
  double lr;
  double final_rate; /* the last learning rate as a share of lr, in (0, 1] */
  int64_t walks_before;
  int64_t total_walks;
  int64_t hold_walks;
  int64_t threads;
  uint64_t seed;
  int64_t vector_width; /* 0: the widest this CPU runs; 4 or 8 */
  int64_t sharing;      /* noise nodes drawn per (context, node) pair (0, word2vec) or once
                           per position for all of its contexts (1, HogBatch) */
  int64_t noise_pool;   /* 0: every noise node drawn from the alias table; else slots of a
                           per-thread pool of recent draws that noise nodes are taken from */
  int64_t noise_reuse;  /* with a pool: noise nodes taken per fresh draw put into it (>= 1) */
  int64_t syn1_format; /* 0: float32; 1: bfloat16; 2: float24 (bytes 1-3 of a float32, 8 values
                          a block of 24 bytes: their high halves, then their third bytes). The
                          narrow ones are written with stochastic rounding (float32 arithmetic) */
} ge_skipgram_config;

/* word2vec's skip-gram with negative sampling over the walks, Hogwild on config->threads
 * threads, in place on syn0 and syn1. counts: {non-finite scores, scores computed}. */
GE_API int ge_skipgram_train(const ge_skipgram_config* config, int64_t* counts);

#ifdef __cplusplus
}
#endif

#endif /* GRAPHEMB_KERNELS_H_ */
