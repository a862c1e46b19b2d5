// .safetensors decoding (io/safetensors.cpp). An accepted file must survive
// write -> read unchanged.
#include <cstring>

#include "fuzz_common.h"
#include "io/tensor_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace mha;
  fuzz::run_expecting_input_errors([&] {
    NamedTensors all = io::detail::decode_safetensors(fuzz::as_view(data, size), "fuzz.safetensors");
    for (const auto& [name, t] : all)
      fuzz::require(t.nbytes() == static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()), "tensor size");
  });
  return 0;
}
