// The rows of a step sorted for ge_fused_update: (index, order) with index = ids ascending
// and order[i] the position in ids of index[i], equal ids in their order of appearance --
// exactly torch.sort(ids, stable=True). A serial LSD radix sort over the bits that
// num_rows needs (two passes of 10 bits for a million rows): a step's ids sort in about a
// millisecond without a parallel region, which on a busy machine costs more than the sort.

#include "common/errors.h"
#include "graphemb_kernels.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

constexpr int kMaxRadixBits = 11;

void sort_rows(const int64_t* in, int64_t n, int64_t num_rows, int64_t* out_keys,
               int64_t* out_positions) {
  ge::require(num_rows >= 0, GE_VALUE_ERROR,
              "graphemb_kernels.sort_rows: num_rows must be >= 0, got ", num_rows);
  for (int64_t i = 0; i < n; ++i) {
    ge::require(static_cast<uint64_t>(in[i]) < static_cast<uint64_t>(num_rows), GE_INDEX_ERROR,
                "graphemb_kernels.sort_rows: ids[", i, "] = ", in[i],
                " is out of range for a table of ", num_rows, " rows");
  }
  int bits = 0;
  while (bits < 63 && (int64_t{1} << bits) < num_rows) ++bits;
  const int passes = (bits + kMaxRadixBits - 1) / kMaxRadixBits;
  if (passes == 0) {  // at most one row: every id is 0
    for (int64_t i = 0; i < n; ++i) {
      out_keys[i] = in[i];
      out_positions[i] = i;
    }
    return;
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
}

}  // namespace

extern "C" int ge_sort_rows(const int64_t* ids, int64_t n, int64_t num_rows, int64_t* index,
                            int64_t* order) {
  return ge::guarded([&] { sort_rows(ids, n, num_rows, index, order); });
}
