#include "ttsim/operands.h"

#include <cstring>

#include "ttsim/fpu_internal.h"
#include "ttsim/matrix_unit.h"

namespace mha::ttsim::detail {

void decode_in0(const float* a, int64_t lda, int64_t rows, int64_t K, DataFormat f, bool fp32, int phases,
                simd::ARec* out) {
  // Vector code lives in the SIMD layer (simd/host_kernels.inc): only a
  // Float32 input's bf16 truncation (16-bit Dst) reaches the significand
  // bits it reads; a tf32 one keeps all ten.
  const uint32_t trunc = f == DataFormat::Float32 && !fp32 ? 0xffff0000u : 0xffffffffu;
  simd::host_kernels().decode_in0(a, lda, rows, K, trunc, phases, out);
}

int64_t live_rows(const simd::ARec* rec, int64_t rows, int64_t K, int phases) {
  // Phase 0's records: a datum is zero in every phase or in none.
  const int64_t per_row = K * phases;
  for (int64_t r = rows; r > 0; --r)
    for (int64_t kt = 0; kt < K / 32; ++kt)
      for (int64_t k = 0; k < 32; ++k)
        if (rec[(r - 1) * per_row + kt * phases * 32 + k].exp != simd::dup16(simd::kZeroExp)) return r;
  return 0;
}

void In1Buffer::resize(int64_t K, int64_t N) {
  // 32 int16 columns are one cache line.
  ld = N >= 256 && N % 64 == 0 ? N + 32 : N;
  const size_t n = static_cast<size_t>(K * ld);
  for (auto* v : {&exp16, &pair16_hi, &pair16_lo})
    if (v->size() < n) v->resize(n);
}

simd::In1 In1Buffer::view(int64_t k0, int64_t c0) const {
  const int64_t o = k0 * ld + c0;
  return {exp16.data() + o, {pair16_hi.data() + o, pair16_lo.data() + o}, ld};
}

namespace {

// encode_srca's fields of 16 Src values into `out` at element offset o.
void encode_in1_16(const simd::KernelTable& kern, const uint32_t u[16], In1Buffer& out, int64_t o) {
  kern.encode_in1_16(u, {&out.exp16[o], &out.pair16_hi[o], &out.pair16_lo[o]});
}

}  // namespace

void decode_in1(const float* b, int64_t ks, int64_t ns, int64_t K, int64_t N, DataFormat f, bool fp32, In1Buffer& out,
                int64_t k0) {
  const simd::KernelTable& kern = simd::host_kernels();
  const int64_t o = k0 * out.ld;
  const simd::In1Words at{out.exp16.data() + o, out.pair16_hi.data() + o, out.pair16_lo.data() + o};
  // Src values already (not Float32): whole blocks in the SIMD layer.
  if (ks == 1 && ns != 1 && f != DataFormat::Float32 && K % 8 == 0) {
    kern.encode_in1_t(b, ns, K, N, at, out.ld);
    return;
  }
  if (ns == 1 && f != DataFormat::Float32) {
    kern.encode_in1_rows(b, ks, K, N, at, out.ld);
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
      // The 16 Src values of a strided gather or a Float32 input.
      uint32_t u[16];
      for (int64_t j = 0; j < 16; ++j) {
        const float x = unpack_to_src(b[k * ks + (n0 + j) * ns], f, fp32);
        std::memcpy(&u[j], &x, 4);
      }
      encode_in1_16(kern, u, out, (k0 + k) * out.ld + n0);
    }
}

}  // namespace mha::ttsim::detail
