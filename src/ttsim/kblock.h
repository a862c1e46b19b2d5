#pragma once
// How a matmul's K dimension passes through Dst when TT-NN's program splits
// it into blocks of `in0_block_w` tiles (the multicast matmul programs'
// compute kernel, bmm_large_block_zm_fused_bias_activation): between blocks
// the partial sums leave Dst through the packer and are either reloaded
// (spill/reload through an intermediate circular buffer) or summed by the
// packer in L1 (packer_l1_acc). Every round trip rounds. docs/TTSIM.md,
// "Matmul K blocking", gives the sources.
#include <cstdint>

#include "ttsim/formats.h"

namespace mha::ttsim {

struct MatmulBlocking {
  // K tiles per block; 0 (or >= Kt) keeps all of K in Dst, as the simple
  // bmm program does.
  int64_t in0_block_w = 0;
  // The packer adds each block's partials into the intermediate buffer in L1
  // instead of the partials being reloaded into Dst.
  bool packer_l1_acc = false;
  // The intermediate buffer's format: Float32 with an FP32 Dst; else
  // Bfloat16 under L1 accumulation, the output format without it.
  DataFormat interm = DataFormat::Bfloat16;
  // With a fused bias the last block also goes to the intermediate buffer
  // (the bias add reads it); otherwise the last block packs to the output,
  // after reloading the accumulated partials under L1 accumulation.
  bool bias_fused = false;

  // Number of K blocks for Kt tiles of K (TT-NN picks in0_block_w dividing
  // Kt; a last, shorter block covers the rest otherwise).
  int64_t blocks(int64_t Kt) const {
    return in0_block_w <= 0 || in0_block_w >= Kt ? 1 : (Kt + in0_block_w - 1) / in0_block_w;
  }
};

// The packer's L1 accumulation of a bf16 value `x` onto the bf16 value `l1`
// already in L1 (ttsim PACR, pack_l1_acc_bf16): exponent-0 inputs count as
// zero; the exact sum is rounded to nearest, ties to even; a result below
// the normal range is a signed zero, above it a signed Inf; +Inf + -Inf is
// the canonical NaN 0x7FC0; a NaN input counts as a huge finite value (one in
// L1 as the largest double, an incoming one as 2^128 times its significand).
float l1_acc_bf16(float l1, float x);
// The same for FP32 (pack_l1_acc_fp32): IEEE single addition with denormal
// inputs and results flushed to signed zero, any NaN result 0x7FC00000.
float l1_acc_fp32(float l1, float x);
// l1[i] = l1_acc_fp32(l1[i], x[i]) for i < n, on vector lanes.
void l1_acc_fp32(float* l1, const float* x, int64_t n);

}  // namespace mha::ttsim
