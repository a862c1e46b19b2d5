#pragma once
// KV cache row formats (model/cache_dtype.h): the bytes one cached K or V row
// of d elements occupies, encoding a float row into them, and widening rows
// back to float. Rows are stored back to back, kv_row_bytes(dt, d) apart.
//
// Layouts of one row of d elements:
//   float32    d x float
//   float16    d x IEEE half, round to nearest even
//   bfloat16   d x bfloat16, round to nearest even (torch's .to(bfloat16))
//   q8_0       d/32 blocks of {fp16 scale; int8 q[32]}          (34 bytes)
//              ggml's block_q8_0 and quantize_row_q8_0_ref: scale = amax/127,
//              q = round-half-away(x / scale); value = q * scale
//   q4_0       d/32 blocks of {fp16 scale; uint8 q[16]}         (18 bytes)
//              ggml's block_q4_0 and quantize_row_q4_0_ref: scale = max / -8
//              (max: the first element of largest magnitude, signed),
//              nibble = min(15, trunc(x / scale + 8.5)); byte j holds element
//              j (low nibble) and j + 16 (high); value = (nibble - 8) * scale
//   bfloat8_b  d/16 face rows of {shared exponent; 16 codes}    (17 bytes)
//   bfloat4_b  d/16 face rows of {shared exponent; 8 bytes}     (9 bytes)
//              codes as tt-sim's host encoder writes them (ttsim/formats.h
//              host_encode_bfp_row: sign above 7 or 3 magnitude bits); a
//              bfloat4_b byte i holds code i (low nibble) and i + 8 (high)
// Where ggml leaves it undefined (a NaN or infinite element in a q8_0/q4_0
// block) the codes are 0.
#include <cstdint>
#include <optional>
#include <string>

#include "model/cache_dtype.h"

namespace mha {

// Bytes of one row of d elements (d a multiple of cache_dtype_block(dt)).
int64_t kv_row_bytes(CacheDtype dt, int64_t d);
// nullopt when rows of d elements fit dt, else what is wrong, e.g.
// "cache_dtype q4_0 needs head widths divisible by 32, found head_dim 80".
std::optional<std::string> kv_width_unsupported(CacheDtype dt, int64_t d, const char* what = "head_dim");
// src [d] floats -> dst [kv_row_bytes(dt, d)] bytes.
void kv_encode_row(CacheDtype dt, const float* src, int64_t d, void* dst);
// n rows of d elements at `rows`, row_bytes apart (0: back to back,
// kv_row_bytes(dt, d); more reads each row's first d elements, as MLA's
// values are its latent rows' first kv_lora_rank) -> dst [n, d] floats at
// row stride ld. Exact: every format's values are floats. SIMD (the decode
// kernel's decoders, widest ISA), so prefill at depth can widen cache
// blocks for the flash kernel at memory speed.
void kv_rows_to_f32(CacheDtype dt, const void* rows, int64_t n, int64_t d, float* dst, int64_t ld,
                    int64_t row_bytes = 0);
// The same for one row, element by element: the definition the SIMD path is
// tested against.
void kv_row_to_f32_scalar(CacheDtype dt, const unsigned char* row, int64_t d, float* dst);
// u: the largest error of one cached element as a fraction of the largest
// magnitude in its block (its own for the one-element formats), from the
// format's rounding: float16 2^-11, bfloat16 2^-8, q8_0 1/254 + 2^-11
// (rounding to the scale, then the scale to fp16), q4_0 (1 + 7*2^-11)/8 (the
// code 15 clips +8 scales to +7), bfloat8_b 2^-6 and bfloat4_b 2^-2 (one unit
// of the shared exponent's last magnitude bit); float32 0. docs/CONFIG.md
// derives the decode output's error bound from it ("Error bounds").
double kv_error_unit(CacheDtype dt);
// u_q: the same for the query as the cpu backend's decode scores read it.
// The integer-score formats (q8_0, q4_0, bfloat8_b, bfloat4_b) round each
// query block with ggml's q8_0 rule, so u_q is q8_0's u; the others keep the
// float32 query (0). The bound counts it beside u.
double kv_query_error_unit(CacheDtype dt);
// Rounds src [d] through the format in place: encode, then widen.
void kv_round_row(CacheDtype dt, float* x, int64_t d);

}  // namespace mha
