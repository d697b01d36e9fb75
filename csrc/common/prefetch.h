// A prefetch of one cache line that the compiler keeps. GCC 12 drops __builtin_prefetch
// from some loops altogether (the aggregation's once dropout's vector code was inlined
// beside them; the optimizer's write-hinted prefetches of the weight and state rows), with
// no warning: an asm statement is never removed. Without x86, the builtin.
#pragma once

#include <cstdint>

namespace ge {

inline __attribute__((always_inline)) void prefetch_line(const void* address) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
#else
  __builtin_prefetch(address);
#endif
}

// Every cache line of the `nbytes` at `p` (a row of a table), ahead of its use: the rows
// the kernels read are scattered over tables of hundreds of MB, and each waits on DRAM.
inline __attribute__((always_inline)) void prefetch_bytes(const void* p, int64_t nbytes) {
  const char* bytes = static_cast<const char*>(p);
  for (int64_t offset = 0; offset < nbytes; offset += 64) prefetch_line(bytes + offset);
}

}  // namespace ge
