// `mha compare REF OUT`: two tensor files read as the CLI reads them, then
// compared and reported. Input layout: byte 0 picks each side's format (npy,
// npz or safetensors) and compare options; bytes 1-2 give the length of the
// reference file; the rest is the output file.
#include <cstring>

#include "compare/compare.h"
#include "compare/report.h"
#include "fuzz_common.h"
#include "io/npy.h"
#include "io/tensor_file.h"

namespace {

mha::Tensor read_side(std::string_view bytes, int format) {
  using namespace mha;
  switch (format) {
    case 0: return io::detail::decode_npy(bytes, "side.npy");
    case 1: {
      NamedTensors all = io::detail::decode_npz(bytes, "side.npz");
      if (all.size() != 1) throw InputError("side.npz: expected one tensor");
      return std::move(all[0].second);
    }
    default: {
      NamedTensors all = io::detail::decode_safetensors(bytes, "side.safetensors");
      if (all.size() != 1) throw InputError("side.safetensors: expected one tensor");
      return std::move(all[0].second);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace mha;
  if (size < 3) return 0;
  const uint8_t sel = data[0];
  std::size_t ref_len = data[1] | (static_cast<std::size_t>(data[2]) << 8);
  std::string_view rest = fuzz::as_view(data + 3, size - 3);
  if (ref_len > rest.size()) ref_len = rest.size();
  fuzz::run_expecting_input_errors([&] {
    Tensor ref = read_side(rest.substr(0, ref_len), sel % 3);
    Tensor out = read_side(rest.substr(ref_len), (sel / 3) % 3);
    compare::Options opt;
    const int cast = (sel >> 4) & 3;  // none, float16, bfloat16, float32
    if (cast == 1) opt.as_dtype = DType::F16;
    if (cast == 2) opt.as_dtype = DType::BF16;
    if (cast == 3) opt.as_dtype = DType::F32;
    opt.equal_nan = sel & 0x40;
    if (sel & 0x80) opt.pcc = 0.99, opt.ulp = 4, opt.max_abs = 1e-3, opt.mean_abs = 1e-4;
    compare::Report r = compare::compare(ref, out, opt);
    fuzz::require(!compare::format_text(r).empty(), "empty text report");
    fuzz::require(!compare::to_json(r).dump().empty(), "empty json report");
    fuzz::require(!(r.pcc < -1.0000001 || r.pcc > 1.0000001), "pcc outside [-1, 1]");
  });
  return 0;
}
