// The library's own entry points: its interface version, the last error of a thread, the
// SIMD level, the threads of the parallel loops.

#include "common/errors.h"
#include "common/parallel.h"
#include "graphemb_kernels.h"

#include <string>

namespace ge {

namespace {
thread_local std::string last_error;
}  // namespace

void set_last_error(const std::string& text) { last_error = text; }

}  // namespace ge

extern "C" {

int ge_abi_version(void) { return GE_ABI_VERSION; }

const char* ge_last_error(void) { return ge::last_error.c_str(); }

const char* ge_simd_level(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // The skip-gram runs its AVX2+FMA loop; the layers' loops (nn/) also have AVX-512 clones.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return "avx512f";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2+fma";
  return "sse2";
#elif defined(__aarch64__)
  return "neon";
#else
  return "scalar";
#endif
}

void ge_set_num_threads(int threads) { ge::set_num_threads(threads); }

int ge_num_threads(void) { return ge::num_threads(); }

int ge_set_openmp(int allowed) { return ge::set_openmp(allowed != 0) ? 1 : 0; }

int ge_uses_openmp(void) { return ge::uses_openmp() ? 1 : 0; }

}  // extern "C"
