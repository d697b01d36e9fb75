// Edge-list files of integer node names, parsed on all threads.
//
// ge_parse_integer_edges(path, skip_lines, delimiter, columns, weighted, parts, ...) reads
// the lines after the first skip_lines, each `source target` (columns 2) or `source target
// third` (columns 3: the weight when weighted, else ignored), into the caller's memory
// (slot 0: sources, then targets, in one block, so that a graph can be built in it; slot
// 1: weights) and gives (edges, smallest id, largest id, dense: whether the ids are
// exactly 0 .. largest) -- or GE_DECLINED as soon as anything might read differently in
// graphemb.io.edge_list's Python reader, which then reads the file itself (and names the
// bad line, if there is one). So this parser accepts only a plain subset of what that
// reader accepts, and reads it to the same values:
//   * fields: decimal integers `[+-]?[0-9]+` that fit in int64; a weight is a decimal
//     number (`[+-]?digits[.digits][e[+-]digits]`, read by std::from_chars, correctly
//     rounded as Python's float() is);
//   * separators: runs of blanks (space, tab) when delimiter is "", else one delimiter
//     character with optional blanks around it;
//   * `#` to the end of the line is a comment; blank lines are skipped; lines end with
//     LF or CRLF.
// Everything else -- other whitespace or control bytes, non-ASCII bytes (also in comments),
// a lone CR (a line break for Python), an id out of int64, a line with another number of
// fields -- is declined, never half-read.
//
// The file is mapped (no copy) and cut at line starts into one part per thread (parts=0; at
// least 1 MiB a part), or into `parts` parts (tests cut small files many ways). A first
// pass counts each part's lines (its most edges), so that every part writes straight into
// its place in the outputs; a second parses. Parts shorter than their line count (blank
// and comment lines) are moved together at the end. The parse gives the pages of the file
// it is done with back as it goes, so that the mapped file and the arrays growing from it
// do not add up in the memory peak.

#include "common/errors.h"
#include "common/parallel.h"
#include "graphemb_kernels.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

namespace ge {
namespace {

// A read-only private mapping of a whole file, unmapped when it goes out of scope.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat info;
    if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0) {
      void* address = ::mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ,
                             MAP_PRIVATE, fd, 0);
      if (address != MAP_FAILED) {
        data_ = static_cast<const char*>(address);
        size_ = static_cast<size_t>(info.st_size);
        ::madvise(address, size_, MADV_WILLNEED);
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* begin() const { return data_; }
  const char* end() const { return data_ + size_; }
  bool mapped() const { return data_ != nullptr; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// Gives the pages of [from, to) that it holds whole back to the kernel: they stay in the
// page cache, but no longer count in the process's resident set (so the mapping of a large
// file does not add up with the arrays parsed from it). Pages read again fault back in.
void release(const char* from, const char* to) {
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(from) + page - 1) / page * page;
  const uintptr_t last = reinterpret_cast<uintptr_t>(to) / page * page;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

constexpr int64_t kReleaseBytes = int64_t{8} << 20;  // released as the parse goes, in steps

struct Format {
  char delimiter;  // 0: runs of blanks
  int64_t columns;
  bool weighted;
};

inline bool is_blank(char c) { return c == ' ' || c == '\t'; }

inline bool is_digit(char c) { return static_cast<unsigned char>(c - '0') <= 9; }

inline void skip_blanks(const char*& p, const char* end) {
  while (p < end && is_blank(*p)) ++p;
}

// At the end of a line (after its blanks): consumes the line break, CRLF or the comment
// and returns 1; returns 0 when the line goes on, -1 when it ends in a way Python could
// split or decode differently (a lone CR, a non-ASCII byte in a comment).
inline int end_of_line(const char*& p, const char* end) {
  if (p == end) return 1;
  const char c = *p;
  if (c == '\n') {
    ++p;
    return 1;
  }
  if (c == '\r') {
    if (p + 1 < end && p[1] == '\n') {
      p += 2;
      return 1;
    }
    return -1;
  }
  if (c != '#') return 0;
  for (++p; p < end; ++p) {
    const auto byte = static_cast<unsigned char>(*p);
    if (byte == '\n') {
      ++p;
      return 1;
    }
    if (byte >= 0x80 || (byte == '\r' && (p + 1 == end || p[1] != '\n'))) return -1;
  }
  return 1;
}

// A decimal int64 at p, `[+-]?0*[0-9]{1,19}`; false (p anywhere) for anything else or an
// overflow.
inline bool parse_id(const char*& p, const char* end, int64_t& out) {
  bool negative = false;
  if (p < end && (*p == '-' || *p == '+')) {
    negative = *p == '-';
    ++p;
  }
  // Past leading zeros, up to 19 digits fit in uint64 unchecked; more are refused.
  while (p + 1 < end && p[0] == '0' && is_digit(p[1])) ++p;
  const char* const first = p;
  const char* const last = p + std::min<std::ptrdiff_t>(end - p, 19);
  uint64_t value = 0;
  while (p < last && is_digit(*p)) {
    value = value * 10 + static_cast<uint64_t>(*p - '0');
    ++p;
  }
  if (p == first || (p < end && is_digit(*p))) return false;
  const uint64_t limit = (uint64_t{1} << 63) - (negative ? 0 : 1);
  if (value > limit) return false;
  out = negative ? static_cast<int64_t>(uint64_t{0} - value) : static_cast<int64_t>(value);
  return true;
}

// Between two fields: blanks (at least one without a delimiter), or blanks, the delimiter,
// blanks.
inline bool separator(const char*& p, const char* end, char delimiter) {
  const char* start = p;
  skip_blanks(p, end);
  if (delimiter == 0) return p > start;
  if (p == end || *p != delimiter) return false;
  ++p;
  skip_blanks(p, end);
  return true;
}

// Where the field at p ends: a blank, a line break, a comment, the delimiter or the end.
inline bool ends_field(char c, char delimiter) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '#' || c == delimiter;
}

// The weight at p: a decimal number of the characters [0-9.eE+-] that std::from_chars
// reads whole (a leading '+', which it does not take, is skipped when a digit or a point
// follows).
inline bool parse_weight(const char*& p, const char* end, char delimiter, double& out) {
  const char* start = p;
  while (p < end && !ends_field(*p, delimiter)) {
    const char c = *p;
    if (!is_digit(c) && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') return false;
    ++p;
  }
  if (start < p && *start == '+') {
    ++start;
    if (start == p || !(is_digit(*start) || *start == '.')) return false;
  }
  if (start == p) return false;
  const auto [stop, error] = std::from_chars(start, p, out, std::chars_format::general);
  return error == std::errc() && stop == p;
}

// An ignored third column: any printable ASCII up to where the field ends (not empty
// without a delimiter: it is a field only if it has characters).
inline bool skip_field(const char*& p, const char* end, char delimiter) {
  const char* start = p;
  while (p < end && !ends_field(*p, delimiter)) {
    const auto byte = static_cast<unsigned char>(*p);
    if (byte < 0x20 || byte >= 0x7f) return false;
    ++p;
  }
  return delimiter != 0 || p > start;
}

struct Part {
  const char* begin = nullptr;  // at a line start
  const char* end = nullptr;    // at a line start, or the end of the file
  int64_t lines = 0;            // its lines, hence its edges at most
  int64_t first_slot = 0;       // where its edges go (the lines of the parts before it)
  int64_t edges = 0;
  int64_t low = std::numeric_limits<int64_t>::max();
  int64_t high = std::numeric_limits<int64_t>::min();
  bool ok = true;
};

// Parses one part into src/dst/weights from part.first_slot; stops early (not ok) as soon as
// any part failed.
void parse_part(Part& part, const Format& format, int64_t* src, int64_t* dst, double* weights,
                std::atomic<bool>& failed) {
  const char* p = part.begin;
  const char* const end = part.end;
  const char delimiter = format.delimiter;
  int64_t slot = part.first_slot;
  int64_t low = part.low, high = part.high;
  const auto fail = [&] {
    part.ok = false;
    failed.store(true, std::memory_order_relaxed);
  };
  const char* kept = p;  // pages before it are released
  while (p < end) {
    if ((slot & 0xffff) == 0) {
      if (failed.load(std::memory_order_relaxed)) return fail();
      if (p - kept >= kReleaseBytes) {
        release(kept, p);
        kept = p;
      }
    }
    skip_blanks(p, end);
    const int line_end = end_of_line(p, end);
    if (line_end < 0) return fail();
    if (line_end > 0) continue;  // a blank or comment line
    int64_t u, v;
    if (!parse_id(p, end, u) || !separator(p, end, delimiter) || !parse_id(p, end, v))
      return fail();
    if (format.columns == 3) {
      if (!separator(p, end, delimiter)) return fail();
      const bool ok = format.weighted ? parse_weight(p, end, delimiter, weights[slot])
                                      : skip_field(p, end, delimiter);
      if (!ok) return fail();
    }
    skip_blanks(p, end);
    if (end_of_line(p, end) <= 0) return fail();
    src[slot] = u;
    dst[slot] = v;
    ++slot;
    low = std::min(low, std::min(u, v));
    high = std::max(high, std::max(u, v));
  }
  part.edges = slot - part.first_slot;
  part.low = low;
  part.high = high;
}

// Moves the parts' edges together (parts wrote from first_slot, their line counts).
template <typename T>
void close_gaps(T* data, const std::vector<Part>& parts) {
  int64_t next = 0;
  for (const Part& part : parts) {
    if (part.first_slot != next && part.edges > 0)
      std::memmove(data + next, data + part.first_slot, sizeof(T) * part.edges);
    next += part.edges;
  }
}

// Whether the ids are exactly 0 .. high, each present (then they are their own node ids).
bool ids_are_dense(const int64_t* src, const int64_t* dst, int64_t edges, int64_t low,
                   int64_t high) {
  if (low != 0 || high >= 2 * edges) return false;  // more names than endpoints
  std::vector<uint8_t> seen(high + 1, 0);
  uint8_t* marks = seen.data();
  // Threads mark the same bytes with the same value: relaxed atomic stores (plain moves).
  parallel_for(0, edges, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      __atomic_store_n(marks + src[j], uint8_t{1}, __ATOMIC_RELAXED);
      __atomic_store_n(marks + dst[j], uint8_t{1}, __ATOMIC_RELAXED);
    }
  });
  return std::find(seen.begin(), seen.end(), uint8_t{0}) == seen.end();
}

// Declined: the file is not a plain integer edge list (the caller reads it itself).
struct Declined {};

// The lines before the first edge line (a header, comments), skipped: where the edges
// start. A lone carriage return there is not a plain edge list's.
const char* skip_lines_before_edges(const char* data, const char* end, int64_t skip_lines) {
  for (int64_t line = 0; line < skip_lines && data < end; ++line) {
    const char* stop = static_cast<const char*>(std::memchr(data, '\n', end - data));
    stop = stop == nullptr ? end : stop + 1;
    const char* cr = static_cast<const char*>(std::memchr(data, '\r', stop - data));
    if (cr != nullptr && (cr + 1 == end || cr[1] != '\n')) throw Declined{};
    data = stop;
  }
  return data;
}

// One part per thread (parts of at least 1 MiB; `parts_wanted` when above 0), cut after a
// line break, with its lines counted and its first slot in the outputs (the lines before it).
std::vector<Part> cut_into_parts(const char* data, const char* end, int64_t parts_wanted) {
  const int64_t bytes = end - data;
  const int64_t num_parts = std::max<int64_t>(
      1, parts_wanted > 0 ? std::min<int64_t>(parts_wanted, bytes)
                          : std::min<int64_t>(num_threads(), bytes >> 20));
  std::vector<Part> parts(num_parts);
  for (int64_t i = 0; i < num_parts; ++i) {
    const char* cut = data + bytes * i / num_parts;
    if (i > 0 && cut > data && cut[-1] != '\n') {
      cut = static_cast<const char*>(std::memchr(cut, '\n', end - cut));
      cut = cut == nullptr ? end : cut + 1;
    }
    parts[i].begin = std::max(cut, i > 0 ? parts[i - 1].begin : data);
  }
  for (int64_t i = 0; i < num_parts; ++i)
    parts[i].end = i + 1 < num_parts ? parts[i + 1].begin : end;
  parallel_for(0, num_parts, 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      Part& part = parts[i];
      part.lines = std::count(part.begin, part.end, '\n') +
                   (part.end > part.begin && part.end[-1] != '\n' ? 1 : 0);
    }
  });
  int64_t slot = 0;
  for (Part& part : parts) {
    part.first_slot = slot;
    slot += part.lines;
  }
  return parts;
}

void parse_integer_edges(const char* path, int64_t skip_lines, char delimiter, int columns,
                         bool weighted, int64_t parts_wanted, ge_allocate allocate,
                         void* context, int64_t* result) {
  require(columns == 2 || columns == 3, GE_VALUE_ERROR,
          "graphemb_kernels.parse_integer_edges: columns must be 2 or 3, got ", columns);
  require(!weighted || columns == 3, GE_VALUE_ERROR,
          "graphemb_kernels.parse_integer_edges: weighted needs 3 columns");
  require(parts_wanted >= 0, GE_VALUE_ERROR,
          "graphemb_kernels.parse_integer_edges: parts must be >= 0, got ", parts_wanted);
  require(skip_lines >= 0, GE_VALUE_ERROR,
          "graphemb_kernels.parse_integer_edges: skip_lines must be >= 0, got ", skip_lines);
  require(delimiter == 0 || std::strchr(" \t\r\n#+-.0123456789eE", delimiter) == nullptr,
          GE_VALUE_ERROR,
          "graphemb_kernels.parse_integer_edges: delimiter must be blanks or one character "
          "that cannot be part of a field, got '", delimiter, "'");
  const Format format{delimiter, columns, weighted};
  const MappedFile file(path);
  if (!file.mapped()) throw Declined{};

  const char* const end = file.end();
  const char* const data = skip_lines_before_edges(file.begin(), end, skip_lines);
  std::vector<Part> parts = cut_into_parts(data, end, parts_wanted);
  const int64_t capacity = parts.back().first_slot + parts.back().lines;

  // Sources then targets in one buffer, the rows of the (2, E) result.
  int64_t* src_data = ge::allocate<int64_t>(allocate, context, 0, 2 * capacity);
  int64_t* dst_data = src_data + capacity;
  double* weight_data = weighted ? ge::allocate<double>(allocate, context, 1, capacity) : nullptr;
  std::atomic<bool> failed{false};
  parallel_for(0, static_cast<int64_t>(parts.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
      parse_part(parts[i], format, src_data, dst_data, weight_data, failed);
  });
  if (failed.load()) throw Declined{};

  int64_t edges = 0;
  int64_t low = std::numeric_limits<int64_t>::max();
  int64_t high = std::numeric_limits<int64_t>::min();
  for (const Part& part : parts) {
    edges += part.edges;
    low = std::min(low, part.low);
    high = std::max(high, part.high);
  }
  if (edges == 0) throw Declined{};
  if (edges < capacity) {
    close_gaps(src_data, parts);
    close_gaps(dst_data, parts);
    std::memmove(src_data + edges, dst_data, sizeof(int64_t) * edges);
    dst_data = src_data + edges;
    if (weighted) close_gaps(weight_data, parts);
  }
  result[0] = edges;
  result[1] = low;
  result[2] = high;
  result[3] = ids_are_dense(src_data, dst_data, edges, low, high) ? 1 : 0;
}

}  // namespace
}  // namespace ge

extern "C" int ge_parse_integer_edges(const char* path, int64_t skip_lines, char delimiter,
                                      int columns, int weighted, int64_t parts,
                                      ge_allocate allocate, void* context, int64_t* result) {
  int declined = 0;
  const int status = ge::guarded([&] {
    try {
      ge::parse_integer_edges(path, skip_lines, delimiter, columns, weighted != 0, parts,
                              allocate, context, result);
    } catch (const ge::Declined&) {
      declined = 1;
    }
  });
  return declined ? GE_DECLINED : status;
}
