// The element types of the CPU core and their conversions to the accumulation type.
//
// float16 and bfloat16 are stored as raw 16-bit patterns and converted by hand: no F16C and no
// external library, so the wheel runs on any x86-64 and the same code compiles in every
// target_clones variant. Every conversion is branch-free (selects only), so it vectorizes inside
// the kernels' simd loops. Rounding from float is round-to-nearest-even, as torch does.
#ifndef UGRAPH_CPU_HALF_H_
#define UGRAPH_CPU_HALF_H_

#include <cstdint>

#include "simd.h"

namespace ugraph {
namespace cpu {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

UG_INLINE float float_of_bits(uint32_t u) { return __builtin_bit_cast(float, u); }
UG_INLINE uint32_t bits_of_float(float f) { return __builtin_bit_cast(uint32_t, f); }

// c ? x : y as bit masks. GCC sinks a float operation feeding only one arm of a ?: into a
// branch (it will not speculate an op that may trap) and then refuses to vectorize the loop;
// masks keep every operation unconditional.
UG_INLINE uint32_t select(bool c, uint32_t x, uint32_t y) {
  const uint32_t m = 0u - uint32_t(c);
  return (x & m) | (y & ~m);
}

UG_INLINE float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;  // exponent and mantissa
  // Normal numbers: move the 10 mantissa bits up and rebias the exponent from 15 to 127.
  const uint32_t normal = (em << 13) + (112u << 23);
  // Inf and NaN (exponent 31) must land on exponent 255, another 112 up.
  const uint32_t special = normal + (112u << 23);
  // Subnormals (exponent 0) are em * 2^-24: an exact float product, and never a float
  // subnormal, so flush-to-zero modes cannot touch it.
  const uint32_t subnormal = bits_of_float(float(int32_t(em)) * 0x1p-24f);
  const uint32_t magnitude = select(em < 0x0400u, subnormal, select(em >= 0x7c00u, special, normal));
  return float_of_bits(magnitude | sign);
}

UG_INLINE uint16_t float_to_half(float f) {
  const uint32_t u = bits_of_float(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t mag = u & 0x7fffffffu;
  // Normal results: rebias the exponent and round the 13 dropped bits to nearest even. A carry
  // out of the mantissa correctly bumps the exponent, up to Inf for values >= 65520.
  const uint32_t odd = (mag >> 13) & 1u;
  const uint32_t normal = (mag - (112u << 23) + 0xfffu + odd) >> 13;
  // Subnormal results (|f| < 2^-14): adding 0.5 puts the half's last mantissa bit at the float's
  // last bit, so the FPU's own round-to-nearest-even does the rounding; subtracting the bits of
  // 0.5 leaves the half pattern.
  const uint32_t subnormal = bits_of_float(float_of_bits(mag) + 0.5f) - bits_of_float(0.5f);
  uint32_t r = select(mag < (113u << 23), subnormal, normal);
  r = select(mag >= (143u << 23), 0x7c00u, r);  // |f| >= 65536 overflows to Inf
  r = select(mag > 0x7f800000u, 0x7e00u, r);    // NaN stays a (quiet) NaN
  return uint16_t(r | sign);
}

UG_INLINE float bf16_to_float(uint16_t b) { return float_of_bits(uint32_t(b) << 16); }

UG_INLINE uint16_t float_to_bf16(float f) {
  const uint32_t u = bits_of_float(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;  // rounding could carry a NaN into Inf
  return uint16_t(select((u & 0x7fffffffu) > 0x7f800000u, quiet_nan, rounded));
}

// Scalar<T>: the accumulation type of T and the conversions to and from it. Half types
// accumulate in float and round once, when the result is stored.
template <typename T>
struct Scalar {
  using Acc = T;
  UG_INLINE static Acc load(T x) { return x; }
  UG_INLINE static T store(Acc x) { return x; }
};

template <>
struct Scalar<Half> {
  using Acc = float;
  UG_INLINE static Acc load(Half x) { return half_to_float(x.bits); }
  UG_INLINE static Half store(Acc x) { return Half{float_to_half(x)}; }
};

template <>
struct Scalar<BFloat16> {
  using Acc = float;
  UG_INLINE static Acc load(BFloat16 x) { return bf16_to_float(x.bits); }
  UG_INLINE static BFloat16 store(Acc x) { return BFloat16{float_to_bf16(x)}; }
};

}  // namespace cpu
}  // namespace ugraph

#endif  // UGRAPH_CPU_HALF_H_
