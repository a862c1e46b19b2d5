#include "backends/ttsim/ops/sdpa/sdpa.h"
#include "backends/ttsim/ops/sdpa/sdpa_standard.h"

#include "backends/ttsim/ops/sdpa/sdpa_streaming.h"

#include "util/error.h"

namespace mha::ttsim {

namespace {

void refuse_float32(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask) {
  const TileTensor* in[] = {&q, &k, &v, mask};
  for (int i = 0; i < 4; ++i)
    if (in[i] && in[i]->format == DataFormat::Float32)
      throw InputError(std::string("sdpa: input ") + std::to_string(i) +
                       " is float32; TT-NN's SDPA takes bfloat16, bfloat8_b or bfloat4_b");
}

// The program the factory picks. tt_metal latest (15a15bf5): the streaming
// kernel with a 16-bit Dst, compute_common.hpp's sdpa_standard with an fp32
// one (docs/TTSIM.md "tt-metal revisions"); 2024's kernel never stands in
// for either.
enum class SdpaProgram { Kernel2024, Standard, Streaming };

SdpaProgram sdpa_program(const SdpaConfig& cfg) {
  if (cfg.compute.tt_metal == TtMetal::R2024) return SdpaProgram::Kernel2024;
  return cfg.compute.fp32_dest_acc_en ? SdpaProgram::Standard : SdpaProgram::Streaming;
}

}  // namespace

void validate_sdpa(const TileTensor& q, const TileTensor& k, const TileTensor& v, const TileTensor* mask,
                   const SdpaConfig& cfg) {
  const SdpaProgram program = sdpa_program(cfg);
  if (program == SdpaProgram::Standard) {
    const std::string gap = sdpa_standard_gap(q, cfg);
    if (!gap.empty()) throw InputError("sdpa: " + gap + "; run it with tt_metal=2024");
  }
  refuse_float32(q, k, v, mask);
  const Shape* ms = mask ? &mask->shape : nullptr;
  const std::string p = program == SdpaProgram::Streaming ? sdpa_streaming_problem(q.shape, k.shape, v.shape, ms, cfg)
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

namespace {

// Flags the emulated kernel does not honour, said once per device (item 6
// of issue 27): the score exp is hard-coded approximate in every revision
// (2024: exp_tile<true>; latest: tt-metal #56710), and at latest the flag
// is inverted where it does reach (exp(m_old - m_new): PR #56925), whose
// approximation differs per kernel.
void note_ignored_flags(TtDevice& dev, const SdpaConfig& cfg, SdpaProgram program) {
  if (program == SdpaProgram::Streaming) {
    for (const std::string& n : sdpa_streaming_flag_notes(cfg)) dev.note(n);
    return;
  }
  const TtMetal t = cfg.compute.tt_metal;
  if (!cfg.exp_approx_mode)
    dev.note(std::string("exp_approx_mode=false does not reach the score exp at tt_metal ") + tt_metal_name(t) +
             (t == TtMetal::Latest ? " (tt-metal #56710)" : " (the kernel's exp_tile<true>)"));
  if (t == TtMetal::Latest)
    dev.note(std::string("exp_approx_mode=") + (cfg.exp_approx_mode ? "true" : "false") +
             " gives exp(m_old - m_new) the " + (cfg.exp_approx_mode ? "accurate" : "polynomial") +
             " exp at tt_metal latest (inverted at the first-column sites, tt-metal PR #56925)");
}

}  // namespace

void sdpa_note_flags(TtDevice& dev, const SdpaConfig& cfg) { note_ignored_flags(dev, cfg, sdpa_program(cfg)); }

TileTensor run_sdpa(TtDevice& dev, const std::string& op, const TileTensor& q, const TileTensor& k,
                    const TileTensor& v, const TileTensor* mask, const SdpaConfig& cfg) {
  validate_sdpa(q, k, v, mask, cfg);
  std::vector<const TileTensor*> ins = {&q, &k, &v};
  if (mask) ins.push_back(mask);
  const SdpaProgram program = sdpa_program(cfg);
  const int64_t cb = program == SdpaProgram::Standard    ? sdpa_standard_cb_bytes(q, k, v, mask, cfg)
                     : program == SdpaProgram::Streaming ? sdpa_streaming_cb_bytes(q, k, v, mask, cfg)
                                                         : sdpa_cb_bytes(q, k, v, mask, cfg);
  check_cb_budget(dev, op, cb, "smaller q_chunk_size / k_chunk_size fit");
  TtDevice::OpTimer timer(dev, op);
  launch_program(dev, op, program_key(cfg), ins, q.shape, cfg.compute.output, cb);
  note_ignored_flags(dev, cfg, program);
  TileTensor out;
  switch (program) {
    case SdpaProgram::Standard: tt_sdpa_standard(q, k, v, mask, out, cfg, dev.exec()); break;
    case SdpaProgram::Streaming: tt_sdpa_streaming(q, k, v, mask, out, cfg, dev.exec()); break;
    case SdpaProgram::Kernel2024: tt_sdpa(q, k, v, mask, out, cfg, dev.exec()); break;
  }
  return out;
}

}  // namespace mha::ttsim
