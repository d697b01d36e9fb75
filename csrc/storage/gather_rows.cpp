// Rows of a table gathered at ids: the CPU lookup of graphemb's tables
// (graphemb/distributed/huge_pages.py index_rows; torch.index_select is the reference and the
// path without this library).
//
// A lookup reads rows scattered over a table of hundreds of MB: each row waits on DRAM, and
// a plain loop of copies keeps only the few misses in flight that the core's reordering
// finds. Here each thread prefetches the row kAhead positions ahead of the one it copies, so
// that about kAhead rows are on their way at any time (a NodeEmbedding lookup of 100,000
// rows of 512 bytes from a 1M-row table, 2 threads: 6.4 ms with index_select, 5.5 ms here).
//
// Every id is checked against the table's rows before anything is written: a bad id raises,
// naming its position and value, and `out` is left as it was.

#include "common/errors.h"
#include "common/parallel.h"
#include "common/prefetch.h"
#include "graphemb_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ge {
namespace {

constexpr int64_t kAhead = 16;           // rows in flight per thread
constexpr int64_t kGrain = 1024;         // rows a thread takes at least
constexpr int64_t kCheckGrain = 1 << 16;  // ids a thread checks at least

// The first position in [begin, end) whose id is outside [0, rows); end if none.
int64_t first_bad_id(const int64_t* ids, int64_t begin, int64_t end, int64_t rows) {
  for (int64_t i = begin; i < end; ++i) {
    if (static_cast<uint64_t>(ids[i]) >= static_cast<uint64_t>(rows)) return i;
  }
  return end;
}

void check_ids(const int64_t* ids, int64_t n, int64_t rows) {
  std::vector<int64_t> first_bad(std::max(1, num_threads()), n);
  parallel_chunks(0, n, kCheckGrain, [&](int64_t chunk, int64_t begin, int64_t end) {
    const int64_t bad = first_bad_id(ids, begin, end, rows);
    if (bad < end) first_bad[chunk] = bad;
  });
  const int64_t i = *std::min_element(first_bad.begin(), first_bad.end());
  if (i < n) {
    throw KernelError(GE_INDEX_ERROR, message("graphemb_kernels.gather_rows: ids[", i, "] = ",
                                              ids[i], " is out of range for a table of ", rows,
                                              " rows"));
  }
}

}  // namespace
}  // namespace ge

extern "C" int ge_gather_rows(const void* table, int64_t rows, int64_t row_bytes,
                              const int64_t* ids, int64_t n, void* out) {
  using namespace ge;
  return guarded([&] {
    require(rows >= 0 && row_bytes >= 0 && n >= 0, GE_VALUE_ERROR,
            "graphemb_kernels.gather_rows: negative size (rows ", rows, ", row_bytes ",
            row_bytes, ", ids ", n, ")");
    check_ids(ids, n, rows);
    const char* source = static_cast<const char*>(table);
    char* target = static_cast<char*>(out);
    parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < std::min(end, begin + kAhead); ++i) {
        prefetch_bytes(source + ids[i] * row_bytes, row_bytes);
      }
      for (int64_t i = begin; i < end; ++i) {
        if (i + kAhead < end) prefetch_bytes(source + ids[i + kAhead] * row_bytes, row_bytes);
        std::memcpy(target + i * row_bytes, source + ids[i] * row_bytes, row_bytes);
      }
    });
  });
}
