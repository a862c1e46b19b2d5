#include "backends/ttsim/ops/matmul/matmul_program.h"

#include <algorithm>

#include "backends/ttsim/ttsim_device.h"

namespace mha::ttsim {

namespace {

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// L1 below the allocator's base on Wormhole: firmware and mailboxes
// (MEM_MAP_END 0x8120) plus the 69 KiB kernel-config buffer.
constexpr int64_t kL1Reserved = 0x8120 + 69 * 1024;

// utilities::get_estimated_size_of_cbs: double-buffered in0 and in1 blocks,
// the output block and the intermediate block of per_m x per_n tiles.
int64_t estimated_cbs(const MatmulCall& c, int64_t per_m, int64_t per_n, int64_t w) {
  const int64_t interm = c.fp32_dest ? tile_bytes(DataFormat::Float32) : tile_bytes(DataFormat::Bfloat16);
  return 2 * per_m * w * tile_bytes(c.a) + 2 * w * per_n * tile_bytes(c.b) + per_m * per_n * tile_bytes(c.out) +
         per_m * per_n * interm;
}
bool cbs_fit(const MatmulCall& c, int64_t per_m, int64_t per_n, int64_t w) {
  return estimated_cbs(c, per_m, per_n, w) < c.l1_bytes - kL1Reserved;
}

// is_narrow_shape: one side more than 8x the other, or (all in DRAM) a side
// within one tile.
bool narrow(int64_t height, int64_t width, bool all_dram) {
  const int64_t ratio = height > width ? height / width : width / height;
  return ratio > 8 || (all_dram && (height <= 32 || width <= 32));
}

// get_mcast_1d_config's block width.
int64_t mcast_1d_block_w(int64_t Kt) { return Kt % 2 == 0 ? 2 : 1; }

// create_simple_matmul_program_config: no core_grid given.
MatmulChoice simple_program(const MatmulCall& c) {
  const int64_t Mt = c.M / 32, Kt = c.K / 32, Nt = c.N / 32;
  if (c.batch_a == 1 && c.batch_b > 1) return {MatmulProgram::Mcast1D, {mcast_1d_block_w(Kt)}};
  int64_t w = 2, f = 1;
  for (int64_t t = 16; t > 1; t /= 2)
    if (cbs_fit(c, t, t, w)) {
      f = t;
      break;
    }
  const int64_t nby = div_up(Mt, f), nbx = div_up(Nt, f);
  const bool is_narrow = narrow(c.M, c.N, c.all_dram);
  const bool wide = is_narrow && c.N > c.M, tall = is_narrow && !wide;
  if ((nby > 1 || nbx > 1) && Kt % w != 0) w = 1;
  const int64_t cores_y = c.grid.y, cores_x = c.grid.x;
  if (c.all_dram || (nbx * nby <= cores_x * cores_y && Kt % w == 0)) {
    int64_t range_x = 0, range_y = 0;
    if (!(nby == 1 && nbx == 1) && nby <= cores_y && nbx <= cores_x) range_x = nbx, range_y = nby;
    if (range_y == 1 || wide || range_x == 1 || tall) return {MatmulProgram::Mcast1D, {mcast_1d_block_w(Kt)}};
    if ((range_y > 0 && nbx <= cores_x && nby <= cores_y) || c.all_dram) {
      // All in DRAM: K is split over the grid's width. (TT-NN may narrow the
      // block further when the CBs do not fit L1; not modelled.)
      if (c.all_dram) w = Kt % cores_x == 0 ? Kt / cores_x : 1;
      return {MatmulProgram::Mcast2D, {w}};
    }
  }
  return {MatmulProgram::MultiCore, {}};
}

// create_matmul_program_config: a core_grid given.
MatmulChoice grid_program(const MatmulCall& c) {
  const int64_t Mt = c.M / 32, Kt = c.K / 32, Nt = c.N / 32;
  if (c.batch_b > 1) {
    if (c.batch_a == 1) return {MatmulProgram::Mcast1D, {mcast_1d_block_w(Kt)}};
    if (!cbs_fit(c, Mt, Nt, 1)) return simple_program(c);
    return {MatmulProgram::Reuse, {1}};
  }
  const bool within_tile = c.K <= 32 || c.M <= 32 || c.N <= 32;
  if (narrow(c.batch_a * c.M, c.N, false) || within_tile) {
    // 1D systolic array: K spread over all cores, then down to a divisor.
    int64_t w = div_up(Kt, static_cast<int64_t>(c.grid.x) * c.grid.y);
    while (Kt % w != 0) --w;
    return {MatmulProgram::Mcast1D, {w}};
  }
  int64_t w = 4;
  while (Kt % w != 0) --w;
  return {MatmulProgram::Mcast2D, {w}};
}

}  // namespace

const char* matmul_program_name(MatmulProgram p) {
  switch (p) {
    case MatmulProgram::MultiCore: return "multi_core";
    case MatmulProgram::Reuse: return "reuse";
    case MatmulProgram::Mcast1D: return "mcast_1d";
    case MatmulProgram::Mcast2D: return "mcast_2d";
  }
  return "?";
}

MatmulCall matmul_call(const TileTensor& a, const TileTensor& b, const ComputeConfig& cfg) {
  MatmulCall call;
  call.batch_a = a.batch;
  call.batch_b = b.batch;
  call.M = a.prows;
  call.K = a.pcols;
  call.N = b.pcols;
  call.a = a.format;
  call.b = b.format;
  call.out = cfg.output;
  call.fp32_dest = cfg.fp32_dest_acc_en;
  return call;
}

MatmulChoice choose_matmul_program(const MatmulCall& c) {
  MatmulChoice ch = c.core_grid ? grid_program(c) : simple_program(c);
  MatmulBlocking& b = ch.blocking;
  const int64_t Kt = c.K / 32, nb = b.blocks(Kt);
  // The factories turn packer_l1_acc on only where it saves reloads.
  const bool l1_acc = c.packer_l1_acc.value_or(c.out != DataFormat::Float32);
  switch (ch.program) {
    case MatmulProgram::MultiCore: b.packer_l1_acc = false; break;
    case MatmulProgram::Reuse: b.packer_l1_acc = l1_acc && nb > 2; break;
    case MatmulProgram::Mcast1D: b.packer_l1_acc = l1_acc && nb > 1; break;
    case MatmulProgram::Mcast2D: b.packer_l1_acc = l1_acc && ((c.bias && nb > 1) || nb > 2); break;
  }
  b.interm = c.fp32_dest ? DataFormat::Float32 : b.packer_l1_acc ? DataFormat::Bfloat16 : c.out;
  b.bias_fused = c.bias;
  return ch;
}

std::string matmul_choice_str(const MatmulChoice& c, int64_t Kt) {
  const MatmulBlocking& b = c.blocking;
  return std::string(matmul_program_name(c.program)) + ",in0_block_w=" +
         std::to_string(b.blocks(Kt) == 1 ? Kt : b.in0_block_w) + ",blocks=" + std::to_string(b.blocks(Kt)) +
         ",l1_acc=" + (b.packer_l1_acc ? "1" : "0") + ",interm=" + format_name(b.interm);
}

}  // namespace mha::ttsim
