#include "ttsim/operands.h"

#include "ttsim/fpu_internal.h"
#include "ttsim/matrix_unit.h"

namespace mha::ttsim::detail {

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
        const uint32_t piece = d.piece[(p >> 1) & 1];
        rec.exp = d.zero ? simd::kZeroExp : d.exp + adj;
        rec.pair = d.zero ? 0 : static_cast<int32_t>((p & 1) ? piece << 16 : piece);
        rec.neg = d.sign ? -1 : 0;
        rec.piece = d.zero ? 0 : static_cast<int32_t>(piece);
        rec.spiece = d.sign ? -rec.piece : rec.piece;
      }
    }
}

void In1Buffer::resize(int64_t K, int64_t N) {
  ld = N;
  exp.resize(static_cast<size_t>(K * N));
  pcs.resize(exp.size());
  neg32.resize(exp.size());
  neg16.resize(exp.size() / 16);
  exp16.resize(exp.size());
  pc16_hi.resize(exp.size());
  pc16_lo.resize(exp.size());
  spc16_hi.resize(exp.size());
  spc16_lo.resize(exp.size());
  pos16.resize(exp.size() / 16);
}

simd::In1 In1Buffer::view(int64_t k0) const {
  const int64_t o = k0 * ld;
  return {exp.data() + o,          pcs.data() + o,
          neg32.data() + o,        {neg16.data() + o / 16, pos16.data() + o / 16},
          exp16.data() + o,        {pc16_hi.data() + o, pc16_lo.data() + o},
          {spc16_hi.data() + o, spc16_lo.data() + o},
          ld};
}

void decode_in1(const float* b, int64_t ks, int64_t ns, int64_t K, int64_t N, DataFormat f, bool fp32, In1Buffer& out,
                int64_t k0) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
      const int64_t o = (k0 + k) * out.ld + n0;
      uint32_t bits = 0;
      for (int64_t j = 0; j < 16; ++j) {
        const SrcDatum d = encode_srca(unpack_to_src(b[k * ks + (n0 + j) * ns], f, fp32));
        out.exp[o + j] = d.zero ? simd::kZeroExp : d.exp;
        // Doubled, so the kernel's alignment can round with one shift.
        out.pcs[o + j] = d.zero ? 0 : static_cast<int32_t>((2u * d.piece[0]) | ((2u * d.piece[1]) << 16));
        out.neg32[o + j] = d.sign ? -1 : 0;
        out.exp16[o + j] = static_cast<int16_t>(out.exp[o + j]);
        out.pc16_hi[o + j] = static_cast<int16_t>(d.zero ? 0 : 2 * d.piece[0]);
        out.pc16_lo[o + j] = static_cast<int16_t>(d.zero ? 0 : 2 * d.piece[1]);
        out.spc16_hi[o + j] = static_cast<int16_t>(d.sign ? -out.pc16_hi[o + j] : out.pc16_hi[o + j]);
        out.spc16_lo[o + j] = static_cast<int16_t>(d.sign ? -out.pc16_lo[o + j] : out.pc16_lo[o + j]);
        bits |= static_cast<uint32_t>(d.sign) << j;
      }
      out.neg16[o / 16] = static_cast<uint16_t>(bits);
      out.pos16[o / 16] = static_cast<uint16_t>(~bits);
    }
}

}  // namespace mha::ttsim::detail
