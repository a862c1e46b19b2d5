// .npz decoding: the zip reader (stored, deflate, zip64) and each member's
// .npy. Every tensor returned must have the bytes its shape needs.
#include "fuzz_common.h"
#include "io/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace mha;
  fuzz::run_expecting_input_errors([&] {
    NamedTensors all = io::detail::decode_npz(fuzz::as_view(data, size), "fuzz.npz");
    for (const auto& [name, t] : all)
      fuzz::require(t.nbytes() == static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()), "tensor size");
  });
  return 0;
}
