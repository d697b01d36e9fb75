// The floating-point storage types of tables: float32, float64, and the 16-bit float16 and
// bfloat16, converted to and from float as torch converts them (round to nearest even).
#pragma once

#include "common/errors.h"
#include "graphemb_kernels.h"

#include <cstdint>
#include <cstring>

namespace ge {

// bfloat16: the high half of a float32.
struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;
  explicit BFloat16(float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof word);
    if ((word & 0x7fffffffU) > 0x7f800000U) {
      bits = 0x7fc0;  // a NaN stays a (quiet) NaN
      return;
    }
    word += 0x7fffU + ((word >> 16) & 1U);  // round to nearest, ties to even
    bits = static_cast<uint16_t>(word >> 16);
  }
  explicit operator float() const {
    const uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
  }
};

// float16: the compiler's IEEE half type (conversions round to nearest even).
using Float16 = _Float16;

// Calls f(T{}) with T the C++ type of `dtype` among the floating storage types.
template <typename F>
void with_storage_type(int dtype, const char* what, F&& f) {
  switch (dtype) {
    case GE_FLOAT32: f(float{}); return;
    case GE_FLOAT64: f(double{}); return;
    case GE_FLOAT16: f(Float16{}); return;
    case GE_BFLOAT16: f(BFloat16{}); return;
    default:
      throw KernelError(GE_TYPE_ERROR, message("graphemb_kernels: ", what,
                                               " must be float32, float64, float16 or bfloat16"));
  }
}

// Storage value -> compute type, and back.
template <typename C, typename W>
inline C load(W value) {
  return static_cast<C>(static_cast<float>(value));
}
template <>
inline double load<double, double>(double value) {
  return value;
}
template <typename W, typename C>
inline W store(C value) {
  return static_cast<W>(value);
}
template <>
inline BFloat16 store<BFloat16, float>(float value) {
  return BFloat16(value);
}
template <>
inline BFloat16 store<BFloat16, double>(double value) {
  return BFloat16(static_cast<float>(value));
}
template <>
inline Float16 store<Float16, double>(double value) {  // through float, as torch's Half(float)
  return static_cast<Float16>(static_cast<float>(value));
}

}  // namespace ge
