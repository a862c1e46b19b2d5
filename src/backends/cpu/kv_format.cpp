#include "backends/cpu/kv_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_decode_kernel.h"
#include "tensor/half.h"
#include "ttsim/formats.h"

namespace mha {

namespace {

constexpr int64_t kQBlock = 32;  // ggml's QK8_0 / QK4_0
constexpr int64_t kFace = 16;    // a Tensix face row

int bfp_bits(CacheDtype dt) { return dt == CacheDtype::Bfloat8_b ? 7 : 3; }

void put_half(unsigned char* p, uint16_t h) { std::memcpy(p, &h, 2); }
uint16_t get_half(const unsigned char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// float -> int8 as C's (int8_t) cast of an in-range value, 0 for NaN: ggml
// leaves non-finite blocks undefined, the cache must not.
int to_int(float x) { return std::isfinite(x) ? static_cast<int>(x) : 0; }

// One ggml q8_0 block: 32 floats -> {fp16 scale; int8 q[32]}.
void encode_q8_0(const float* x, unsigned char* b) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, f16_from_f32(d));
  for (int64_t j = 0; j < kQBlock; ++j) b[2 + j] = static_cast<unsigned char>(static_cast<int8_t>(to_int(std::round(x[j] * id))));
}

// One ggml q4_0 block: 32 floats -> {fp16 scale; 16 bytes of nibble pairs}.
void encode_q4_0(const float* x, unsigned char* b) {
  float amax = 0.0f, max = 0.0f;
  for (int64_t j = 0; j < kQBlock; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, f16_from_f32(d));
  for (int64_t j = 0; j < kQBlock / 2; ++j) {
    const int lo = std::min(15, to_int(x[j] * id + 8.5f)), hi = std::min(15, to_int(x[j + 16] * id + 8.5f));
    b[2 + j] = static_cast<unsigned char>((lo & 15) | (hi & 15) << 4);
  }
}

void encode_bfp(const float* x, unsigned char* b, int bits) {
  const ttsim::BfpRow r = ttsim::host_encode_bfp_row(x, bits);
  b[0] = r.shared_exp;
  if (bits == 7)
    std::memcpy(b + 1, r.codes, 16);
  else
    for (int i = 0; i < 8; ++i) b[1 + i] = static_cast<unsigned char>(r.codes[i] | r.codes[i + 8] << 4);
}

void decode_bfp(const unsigned char* b, float* out, int bits) {
  ttsim::BfpRow r;
  r.shared_exp = b[0];
  if (bits == 7)
    std::memcpy(r.codes, b + 1, 16);
  else
    for (int i = 0; i < 8; ++i) r.codes[i] = b[1 + i] & 15, r.codes[i + 8] = b[1 + i] >> 4;
  ttsim::decode_bfp_row(r, bits, out);
}

}  // namespace

int64_t kv_row_bytes(CacheDtype dt, int64_t d) {
  switch (dt) {
    case CacheDtype::Float32: return 4 * d;
    case CacheDtype::Float16:
    case CacheDtype::Bfloat16: return 2 * d;
    case CacheDtype::Q8_0: return d / kQBlock * (2 + kQBlock);
    case CacheDtype::Q4_0: return d / kQBlock * (2 + kQBlock / 2);
    case CacheDtype::Bfloat8_b: return d / kFace * (1 + kFace);
    case CacheDtype::Bfloat4_b: return d / kFace * (1 + kFace / 2);
  }
  return 0;
}

std::optional<std::string> kv_width_unsupported(CacheDtype dt, int64_t d, const char* what) {
  const int64_t blk = cache_dtype_block(dt);
  if (d % blk == 0) return std::nullopt;
  return std::string("cache_dtype ") + cache_dtype_name(dt) + " needs head widths divisible by " +
         std::to_string(blk) + ", found " + what + " " + std::to_string(d);
}

void kv_encode_row(CacheDtype dt, const float* src, int64_t d, void* dst) {
  unsigned char* b = static_cast<unsigned char*>(dst);
  switch (dt) {
    case CacheDtype::Float32: std::memcpy(b, src, sizeof(float) * d); return;
    case CacheDtype::Float16:
      for (int64_t i = 0; i < d; ++i) put_half(b + 2 * i, f16_from_f32(src[i]));
      return;
    case CacheDtype::Bfloat16:
      for (int64_t i = 0; i < d; ++i) put_half(b + 2 * i, bf16_from_f32(src[i]));
      return;
    case CacheDtype::Q8_0:
      for (int64_t i = 0; i < d / kQBlock; ++i) encode_q8_0(src + i * kQBlock, b + i * (2 + kQBlock));
      return;
    case CacheDtype::Q4_0:
      for (int64_t i = 0; i < d / kQBlock; ++i) encode_q4_0(src + i * kQBlock, b + i * (2 + kQBlock / 2));
      return;
    case CacheDtype::Bfloat8_b:
    case CacheDtype::Bfloat4_b: {
      const int bits = bfp_bits(dt);
      const int64_t step = kv_row_bytes(dt, kFace);
      for (int64_t i = 0; i < d / kFace; ++i) encode_bfp(src + i * kFace, b + i * step, bits);
      return;
    }
  }
}

// The exact scalar decode of one row (the reference for the fast path).
void kv_row_to_f32_scalar(CacheDtype dt, const unsigned char* b, int64_t d, float* y) {
  switch (dt) {
    case CacheDtype::Float32: std::memcpy(y, b, sizeof(float) * d); break;
    case CacheDtype::Float16:
      for (int64_t i = 0; i < d; ++i) y[i] = f32_from_f16(get_half(b + 2 * i));
      break;
    case CacheDtype::Bfloat16:
      for (int64_t i = 0; i < d; ++i) y[i] = f32_from_bf16(get_half(b + 2 * i));
      break;
    case CacheDtype::Q8_0:
      for (int64_t k = 0; k < d / kQBlock; ++k) {
        const unsigned char* blk = b + k * (2 + kQBlock);
        const float s = f32_from_f16(get_half(blk));
        for (int64_t j = 0; j < kQBlock; ++j) y[k * kQBlock + j] = static_cast<int8_t>(blk[2 + j]) * s;
      }
      break;
    case CacheDtype::Q4_0:
      for (int64_t k = 0; k < d / kQBlock; ++k) {
        const unsigned char* blk = b + k * (2 + kQBlock / 2);
        const float s = f32_from_f16(get_half(blk));
        for (int64_t j = 0; j < kQBlock / 2; ++j) {
          y[k * kQBlock + j] = static_cast<float>((blk[2 + j] & 15) - 8) * s;
          y[k * kQBlock + j + 16] = static_cast<float>((blk[2 + j] >> 4) - 8) * s;
        }
      }
      break;
    case CacheDtype::Bfloat8_b:
    case CacheDtype::Bfloat4_b: {
      const int64_t step = kv_row_bytes(dt, kFace);
      for (int64_t k = 0; k < d / kFace; ++k) decode_bfp(b + k * step, y + k * kFace, bfp_bits(dt));
      break;
    }
  }
}

void kv_rows_to_f32(CacheDtype dt, const void* rows, int64_t n, int64_t d, float* dst, int64_t ld,
                    int64_t row_bytes) {
  const int64_t rb = row_bytes > 0 ? row_bytes : kv_row_bytes(dt, d);
  const unsigned char* p = static_cast<const unsigned char*>(rows);
  if (dt == CacheDtype::Float32) {
    for (int64_t r = 0; r < n; ++r) std::memcpy(dst + r * ld, p + r * rb, sizeof(float) * d);
    return;
  }
  // The decode kernel's SIMD decoders (exact but for one case: block-float
  // face rows whose shared exponent is at most 6 (bfloat8_b) or 2
  // (bfloat4_b), all their values below 2^-120, which they read as zeros and
  // tt-metal's decode does not: those face rows are decoded again here).
  cpu::decode_widen()(dt, rows, n, d, rb, dst, ld);
  if (dt != CacheDtype::Bfloat8_b && dt != CacheDtype::Bfloat4_b) return;
  const int64_t step = kv_row_bytes(dt, kFace), top = bfp_bits(dt) - 1;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < d / kFace; ++k) {
      const unsigned char* f = p + r * rb + k * step;
      if (f[0] <= top) decode_bfp(f, dst + r * ld + k * kFace, bfp_bits(dt));
    }
}

double kv_error_unit(CacheDtype dt) {
  switch (dt) {
    case CacheDtype::Float32: return 0.0;
    case CacheDtype::Float16: return std::ldexp(1.0, -11);
    case CacheDtype::Bfloat16: return std::ldexp(1.0, -8);  // 8 significant bits
    case CacheDtype::Q8_0: return 1.0 / 254 + std::ldexp(1.0, -11);
    case CacheDtype::Q4_0: return (1.0 + 7 * std::ldexp(1.0, -11)) / 8;
    case CacheDtype::Bfloat8_b: return std::ldexp(1.0, -6);
    case CacheDtype::Bfloat4_b: return std::ldexp(1.0, -2);
  }
  return 0.0;
}

double kv_query_error_unit(CacheDtype dt) {
  switch (dt) {
    case CacheDtype::Q8_0:
    case CacheDtype::Q4_0:
    case CacheDtype::Bfloat8_b:
    case CacheDtype::Bfloat4_b: return kv_error_unit(CacheDtype::Q8_0);
    case CacheDtype::Float32:
    case CacheDtype::Float16:
    case CacheDtype::Bfloat16: return 0.0;
  }
  return 0.0;
}

void kv_round_row(CacheDtype dt, float* x, int64_t d) {
  if (dt == CacheDtype::Float32) return;
  std::vector<unsigned char> tmp(kv_row_bytes(dt, d));
  kv_encode_row(dt, x, d, tmp.data());
  kv_rows_to_f32(dt, tmp.data(), 1, d, x, d);
}

}  // namespace mha
