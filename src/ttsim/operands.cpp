#include "ttsim/operands.h"

#include "ttsim/fpu_internal.h"
#include "ttsim/matrix_unit.h"

namespace mha::ttsim::detail {

namespace {

inline int32_t signed_piece(const SrcDatum& d, int i) { return d.sign ? -int32_t(d.piece[i]) : int32_t(d.piece[i]); }
inline uint32_t half16(int32_t v) { return static_cast<uint32_t>(v) & 0xffffu; }

}  // namespace

void decode_in0(const float* a, int64_t lda, int64_t rows, int64_t K, DataFormat f, bool fp32, int phases,
                simd::ARec* out) {
  const int64_t per_row = K * phases;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const SrcDatum d = encode_srcb(unpack_to_src(a[r * lda + k], f, fp32));
      for (int p = 0; p < phases; ++p) {
        // As detail::dot16: the low pieces weigh 2^-5 (SrcA) and 2^-7 (SrcB).
        const int32_t adj = -127 - ((p & 1) ? 5 : 0) - ((p & 2) ? 7 : 0);
        simd::ARec& rec = out[r * per_row + ((k / 32) * phases + p) * 32 + k % 32];
        const uint32_t piece = half16(signed_piece(d, (p >> 1) & 1));
        rec.exp = d.zero ? simd::kZeroExp : d.exp + adj;
        rec.pair = d.zero ? 0 : static_cast<int32_t>((p & 1) ? piece << 16 : piece);
      }
    }
}

void decode_in1(const float* b, int64_t ks, int64_t ns, int64_t K, int64_t N, DataFormat f, bool fp32, int32_t* bexp,
                int32_t* bpcs) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const SrcDatum d = encode_srca(unpack_to_src(b[k * ks + n * ns], f, fp32));
      bexp[k * N + n] = d.zero ? simd::kZeroExp : d.exp;
      bpcs[k * N + n] =
          d.zero ? 0 : static_cast<int32_t>(half16(signed_piece(d, 0)) | (half16(signed_piece(d, 1)) << 16));
    }
}

}  // namespace mha::ttsim::detail
