// The rows of a step sorted for ge_fused_update: (index, order) with index = ids ascending
// and order[i] the position in ids of index[i], equal ids in their order of appearance --
// exactly torch.sort(ids, stable=True).
//
// An LSD radix sort of one 64-bit word per id, (id << position bits) | position: sorting
// the words by their id bits keeps equal ids in the order of their positions, and each
// pass moves one array instead of two (two passes of 10 bits for a million rows). The
// passes move the words between the two output arrays, which need no scratch space of
// their own. On the calling thread: a step's ids (a few hundred thousand) sort in one to
// two milliseconds, and in a process where torch's threads have just run, a parallel
// region of the library's own costs more than it saves (measured: 2.5 ms on one thread,
// 4.1 ms on two, for 288k ids of a million rows on 2 cores).
//
// A step's ids are mostly sorted already: a sampled block lists its destination nodes
// first and the sources it adds after them in ascending order, so the ids of a 3-layer
// batch end in a long ascending run (about 85 % of them) after a few shorter ones. Where
// the ascending tail holds at least half of the ids, the head is sorted (the same way,
// recursively) and merged with the tail in one sweep from the back, in place in the
// outputs: a radix pass scatters every id to one of a thousand buckets, the merge only
// reads and writes in order (measured inside a GraphSAGE training step, 288k ids of a
// million rows: 4.2 ms radix sorted, 1.5 ms merged).

#include "common/errors.h"
#include "graphemb_kernels.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace {

constexpr int kMaxRadixBits = 11;

// Bits needed to write every value in [0, bound).
int bits_below(uint64_t bound) {
  int bits = 0;
  while (bits < 64 && (uint64_t{1} << bits) < bound) ++bits;
  return bits;
}

// Where each bucket's words start, pass by pass (buckets per pass): the digits of every
// pass counted in one sweep over the ids (a pass's digit of a word is its id's).
std::vector<int64_t> bucket_starts(const int64_t* in, int64_t n, int passes, int radix_bits) {
  const int64_t buckets = int64_t{1} << radix_bits;
  const uint64_t mask = static_cast<uint64_t>(buckets - 1);
  std::vector<int64_t> starts(passes * buckets, 0);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t id = static_cast<uint64_t>(in[i]);
    for (int pass = 0; pass < passes; ++pass) {
      ++starts[pass * buckets + ((id >> (pass * radix_bits)) & mask)];
    }
  }
  for (int pass = 0; pass < passes; ++pass) {
    int64_t offset = 0;
    for (int64_t b = pass * buckets; b < (pass + 1) * buckets; ++b) {
      const int64_t count = starts[b];
      starts[b] = offset;
      offset += count;
    }
  }
  return starts;
}

// The words (id << position_bits) | position, sorted by their id bits in stable counting
// passes of at most kMaxRadixBits from one output array to the other (the outputs are the
// only scratch space), then split in place into ids and positions.
void sort_words(const int64_t* in, int64_t n, int id_bits, int position_bits,
                int64_t* out_keys, int64_t* out_positions) {
  const int passes = (id_bits + kMaxRadixBits - 1) / kMaxRadixBits;
  const int radix_bits = (id_bits + passes - 1) / passes;
  const int64_t buckets = int64_t{1} << radix_bits;
  const uint64_t mask = static_cast<uint64_t>(buckets - 1);
  std::vector<int64_t> next = bucket_starts(in, n, passes, radix_bits);
  uint64_t* buffer[2] = {reinterpret_cast<uint64_t*>(out_keys),
                         reinterpret_cast<uint64_t*>(out_positions)};
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = position_bits + pass * radix_bits;
    int64_t* slots = next.data() + pass * buckets;
    uint64_t* dst = buffer[pass % 2];
    if (pass == 0) {
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t word = (static_cast<uint64_t>(in[i]) << position_bits) | i;
        dst[slots[(word >> shift) & mask]++] = word;
      }
    } else {
      const uint64_t* src = buffer[(pass - 1) % 2];
      for (int64_t i = 0; i < n; ++i) dst[slots[(src[i] >> shift) & mask]++] = src[i];
    }
  }
  const uint64_t position_mask = position_bits == 0 ? 0 : ~uint64_t{0} >> (64 - position_bits);
  const uint64_t* words = buffer[(passes - 1) % 2];
  for (int64_t i = 0; i < n; ++i) {  // element by element: in place is safe
    const uint64_t word = words[i];
    out_keys[i] = static_cast<int64_t>(word >> position_bits);
    out_positions[i] = static_cast<int64_t>(word & position_mask);
  }
}

// in[0, n) sorted by one of the paths below (the header comment); ids are in range.
void sort_checked(const int64_t* in, int64_t n, int64_t num_rows, int64_t* out_keys,
                  int64_t* out_positions);

// The head in[0, head) sorted into the outputs' first `head` slots, then merged from the
// back with the ascending tail in[head, n) (its positions head .. n - 1). Writing slot
// w = i + j + 1 - head (i, j: the head's and the tail's next elements from the back)
// never overwrites a head element not yet read, since w >= i. On equal ids the tail's
// element goes last: its position is the larger (stable).
void merge_ascending_tail(const int64_t* in, int64_t n, int64_t head, int64_t num_rows,
                          int64_t* out_keys, int64_t* out_positions) {
  sort_checked(in, head, num_rows, out_keys, out_positions);
  int64_t i = head - 1, j = n - 1;
  for (int64_t w = n - 1; j >= head; --w) {
    if (i >= 0 && out_keys[i] > in[j]) {
      out_keys[w] = out_keys[i];
      out_positions[w] = out_positions[i];
      --i;
    } else {
      out_keys[w] = in[j];
      out_positions[w] = j;
      --j;
    }
  }
}

void sort_checked(const int64_t* in, int64_t n, int64_t num_rows, int64_t* out_keys,
                  int64_t* out_positions) {
  if (n == 0) return;
  int64_t head = n - 1;  // where the ascending tail starts
  while (head > 0 && in[head - 1] <= in[head]) --head;
  if (n - head >= n / 2) {
    merge_ascending_tail(in, n, head, num_rows, out_keys, out_positions);
    return;
  }
  const int id_bits = bits_below(static_cast<uint64_t>(num_rows));
  const int position_bits = bits_below(static_cast<uint64_t>(n));
  if (id_bits == 0) {  // at most one row: every id is 0
    std::copy(in, in + n, out_keys);
    std::iota(out_positions, out_positions + n, int64_t{0});
  } else if (id_bits + position_bits <= 64) {
    sort_words(in, n, id_bits, position_bits, out_keys, out_positions);
  } else {  // ids and positions do not share a word (tables beyond 2^40 rows or so)
    std::iota(out_positions, out_positions + n, int64_t{0});
    std::stable_sort(out_positions, out_positions + n,
                     [&](int64_t a, int64_t b) { return in[a] < in[b]; });
    for (int64_t i = 0; i < n; ++i) out_keys[i] = in[out_positions[i]];
  }
}

void sort_rows(const int64_t* in, int64_t n, int64_t num_rows, int64_t* out_keys,
               int64_t* out_positions) {
  ge::require(num_rows >= 0, GE_VALUE_ERROR,
              "graphemb_kernels.sort_rows: num_rows must be >= 0, got ", num_rows);
  for (int64_t i = 0; i < n; ++i) {
    ge::require(static_cast<uint64_t>(in[i]) < static_cast<uint64_t>(num_rows), GE_INDEX_ERROR,
                "graphemb_kernels.sort_rows: ids[", i, "] = ", in[i],
                " is out of range for a table of ", num_rows, " rows");
  }
  sort_checked(in, n, num_rows, out_keys, out_positions);
}

}  // namespace

extern "C" int ge_sort_rows(const int64_t* ids, int64_t n, int64_t num_rows, int64_t* index,
                            int64_t* order) {
  return ge::guarded([&] { sort_rows(ids, n, num_rows, index, order); });
}
