#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"

#include "backends/ttsim/ops/eltwise/eltwise.h"

#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"
#include "backends/ttsim/ops/sdpa/sdpa_streaming_steps.h"
#include "backends/ttsim/ops/sdpa/sdpa_window.h"

#include "util/error.h"

namespace mha::ttsim {

namespace {

// TT-NN's dtype check. At latest the factory takes a float32 Q (scalar_df
// Float32, Q unpacked to Src as TF32 / bf16); K, V and a mask stay 16-bit
// or block float.
void refuse_float32(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                    TtMetal t) {
  const TileTensor* in[] = {&q, &k, &v, mask};
  for (int i = t == TtMetal::R2024 ? 0 : 1; i < 4; ++i)
    if (in[i] && in[i]->format == DataFormat::Float32)
      throw InputError(std::string("sdpa: input ") + std::to_string(i) +
                       " is float32; TT-NN's SDPA takes bfloat16, bfloat8_b or bfloat4_b" +
                       (i == 0 ? " (a float32 Q runs at tt_metal latest)" : ""));
}

// What ttnn.transformer.scaled_dot_product_attention hands the device
// operation as the mask at latest: the given mask times 1 / scale, a
// ttnn.multiply by a Python float in the mask's dtype, skipped at scale 1
// (sdpa.cpp's "Pre-multiply the mask by 1/scale", stored at 00863da9;
// tt-metal #42891 for #42694, as tt-metal #55337 quotes it). Both latest
// kernels add the mask to the unscaled scores and fold the scale into the
// exp, so the op undoes the scale the exp puts on the mask; 0 and -inf
// stay, and a power-of-two 1 / scale (dh 64: 8) is exact. 2024's kernel
// scaled the scores before the mask: no multiply.
const TileTensor* op_mask(TtDevice& dev, const TileTensor* mask, const TileTensor& q, const SdpaConfig& cfg,
                          TileTensor& scaled) {
  if (!mask || sdpa_program(cfg) == SdpaProgram::Kernel2024) return mask;
  const float scale = sdpa_latest_scale(cfg, q);
  if (scale == 1.0f) return mask;
  scaled = run_multiply_scalar(dev, "ttnn.multiply", *mask, 1.0f / scale,
                               eltwise_attributes(mask->format, false, false, cfg.compute.arch));
  return &scaled;
}

}  // namespace

SdpaProgram sdpa_program(const SdpaConfig& cfg) {
  if (cfg.compute.tt_metal == TtMetal::R2024) return SdpaProgram::Kernel2024;
  return cfg.compute.fp32_dest_acc_en ? SdpaProgram::Standard : SdpaProgram::Streaming;
}

void validate_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                   const SdpaConfig& cfg) {
  const SdpaProgram program = sdpa_program(cfg);
  if (program == SdpaProgram::Standard) {
    const std::string gap = sdpa_standard_gap(cfg);
    if (!gap.empty()) throw InputError("sdpa: " + gap + "; run it with tt_metal=2024");
  }
  refuse_float32(q, k, v, mask, cfg.compute.tt_metal);
  const Shape* ms = mask ? &mask->shape : nullptr;
  // Both latest programs pad the lengths to whole chunks; 2024's does not.
  const std::string p = program == SdpaProgram::Streaming  ? sdpa_streaming_problem(q.shape, k.shape, v.shape, ms, cfg)
                        : program == SdpaProgram::Standard ? sdpa_padded_problem(q.shape, k.shape, v.shape, ms, cfg)
                                                           : sdpa_problem(q.shape, k.shape, v.shape, ms, cfg);
  if (!p.empty()) throw InputError("sdpa: " + p);
}

int64_t sdpa_cb_bytes(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                      const SdpaConfig& cfg) {
  // dht: Q's and K's tiles per row; vdht: V's and the output's (MLA's head_dim_v).
  const int64_t sq = cfg.q_chunk_size / 32, sk = cfg.k_chunk_size / 32, dht = q.pcols / 32, vdht = v.pcols / 32;
  const int64_t bf16 = tile_bytes(DataFormat::Bfloat16);
  int64_t b = sq * dht * tile_bytes(q.format) * 2 + sk * (dht * tile_bytes(k.format) + vdht * tile_bytes(v.format)) * 2;
  b += sq * sk * (mask ? tile_bytes(mask->format) : tile_bytes(DataFormat::Bfp4_b));
  b += (sq * sk + 2 * sq * vdht + 6 * sq + 2) * bf16 + sq * vdht * tile_bytes(cfg.compute.output);
  return b;
}

int64_t sdpa_program_cb_bytes(SdpaProgram program, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                              const TileTensor* mask, const SdpaConfig& cfg) {
  switch (program) {
    case SdpaProgram::Standard: return sdpa_standard_cb_bytes(q, k, v, mask, cfg);
    case SdpaProgram::Streaming: return sdpa_streaming_cb_bytes(q, k, v, mask, cfg);
    case SdpaProgram::Kernel2024: break;
  }
  return sdpa_cb_bytes(q, k, v, mask, cfg);
}

void sdpa_program_run(SdpaProgram program, const TileTensor& q, const TileTensor& k, const TileTensor& v,
                      const TileTensor* mask, TileTensor& out, const SdpaConfig& cfg, const Exec& ex,
                      int64_t chunk_start) {
  switch (program) {
    case SdpaProgram::Standard: tt_sdpa_standard(q, k, v, mask, out, cfg, ex, chunk_start); break;
    case SdpaProgram::Streaming: tt_sdpa_streaming(q, k, v, mask, out, cfg, ex, chunk_start); break;
    case SdpaProgram::Kernel2024: tt_sdpa(q, k, v, mask, out, cfg, ex, chunk_start); break;
  }
}

// Flags the emulated kernel does not honour, said once per device (item 6
// of issue 27): the score exp is hard-coded approximate in every revision
// (2024: exp_tile<true>; latest: tt-metal #56710), and at latest the flag
// is inverted where it does reach (exp(m_old - m_new): PR #56925), whose
// approximation differs per kernel. At latest also the padded keys a
// given mask lets into the softmax (tt-metal #54833), a wrong result the
// emulation reproduces.
void sdpa_note_flags(TtDevice& dev, const SdpaConfig& cfg, int64_t s_k, bool has_mask) {
  const std::string leak = sdpa_padded_mask_note(cfg, s_k, has_mask);
  if (!leak.empty()) dev.note(leak);
  if (sdpa_program(cfg) == SdpaProgram::Streaming) {
    for (const std::string& n : sdpa_streaming_flag_notes(cfg)) dev.note(n);
    return;
  }
  const TtMetal t = cfg.compute.tt_metal;
  if (t == TtMetal::Latest) {  // the fp32-Dst program's window mask (issue 27 item 6: a wrong result reproduced)
    const std::string w = sdpa_window_generated_note(cfg);
    if (!w.empty()) dev.note(w);
  }
  if (!cfg.exp_approx_mode)
    dev.note(std::string("exp_approx_mode=false does not reach the score exp at tt_metal ") + tt_metal_name(t) +
             (t == TtMetal::Latest ? " (tt-metal #56710)" : " (the kernel's exp_tile<true>)"));
  if (t == TtMetal::Latest)
    dev.note(std::string("exp_approx_mode=") + (cfg.exp_approx_mode ? "true" : "false") +
             " gives exp(m_old - m_new) the " + (cfg.exp_approx_mode ? "accurate" : "polynomial") +
             " exp at tt_metal latest (inverted at the first-column sites, tt-metal PR #56925)");
}

TileTensor run_sdpa(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                    const TileTensor& v, const TileTensor* given_mask, const SdpaConfig& cfg) {
  validate_sdpa(q, k, v, given_mask, cfg);
  TileTensor scaled;
  const TileTensor* mask = op_mask(dev, given_mask, q, cfg, scaled);
  std::vector<const TileTensor*> ins = {&q, &k, &v};
  if (mask) ins.push_back(mask);
  const SdpaProgram program = sdpa_program(cfg);
  const int64_t cb = sdpa_program_cb_bytes(program, q, k, v, mask, cfg);
  check_cb_budget(dev, op, cb, "smaller q_chunk_size / k_chunk_size fit");
  TtDevice::OpTimer timer(dev, op);
  launch_program(dev, op, program_key(cfg), ins, q.shape, cfg.compute.output, cb);
  sdpa_note_flags(dev, cfg, k.shape[2], mask != nullptr);
  TileTensor out;
  sdpa_program_run(program, q, k, v, mask, out, cfg, dev.exec());
  return out;
}

}  // namespace mha::ttsim
