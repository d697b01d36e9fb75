// The run-time dispatched copies of the float loops: AVX-512, AVX2 and baseline clones
// (the widest the CPU runs is chosen when the library loads), compiled without
// contracting a product and a sum into one FMA, so that every clone gives the same floats.
#pragma once

#define GE_FLOAT_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
