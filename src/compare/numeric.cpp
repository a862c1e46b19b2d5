#include "compare/numeric.h"

#include <cfloat>
#include <cstring>
#include <limits>

#include "tensor/half.h"

namespace mha::compare {

namespace {

// double -> float without the undefined behaviour of converting an
// out-of-range value: beyond FLT_MAX it rounds as IEEE does (to FLT_MAX
// within half a step, else to Inf).
float to_f32(double v) {
  if (std::isnan(v) || std::fabs(v) <= FLT_MAX) return static_cast<float>(v);
  const double half_step = std::ldexp(1.0, 103);  // half an ulp at FLT_MAX
  float big = std::fabs(v) < static_cast<double>(FLT_MAX) + half_step ? FLT_MAX : INFINITY;
  return v < 0 ? -big : big;
}

// Maps a sign-magnitude bit pattern to a signed integer that increases with
// the value, with +0 and -0 both at 0.
int64_t ordinal(uint64_t bits, int width) {
  uint64_t sign = uint64_t{1} << (width - 1);
  int64_t magnitude = static_cast<int64_t>(bits & (sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

uint64_t bits_in(DType t, double v) {
  switch (t) {
    case DType::F16: return f16_from_f32(to_f32(v));
    case DType::BF16: return bf16_from_f32(to_f32(v));
    case DType::F32: return f32_bits(to_f32(v));
    default: {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      return u;
    }
  }
}

int bit_width(DType t) { return t == DType::F16 || t == DType::BF16 ? 16 : t == DType::F32 ? 32 : 64; }

}  // namespace

double round_to(DType t, double v) {
  switch (t) {
    case DType::F16: return f32_from_f16(f16_from_f32(to_f32(v)));
    case DType::BF16: return round_bf16(to_f32(v));
    case DType::F32: return to_f32(v);
    default: return v;
  }
}

double ulp_distance(DType t, double a, double b) {
  bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na && nb ? 0.0 : INFINITY;
  if (!dtype_is_float(t)) return std::fabs(a - b);
  int width = bit_width(t);
  int64_t oa = ordinal(bits_in(t, a), width), ob = ordinal(bits_in(t, b), width);
  // Unsigned difference: across the sign in float64 it can exceed INT64_MAX.
  uint64_t d = oa >= ob ? static_cast<uint64_t>(oa) - static_cast<uint64_t>(ob)
                        : static_cast<uint64_t>(ob) - static_cast<uint64_t>(oa);
  return static_cast<double>(d);
}

std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (std::size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 0) break;
    index[k] = flat % shape[k];
    flat /= shape[k];
  }
  return index;
}

}  // namespace mha::compare
