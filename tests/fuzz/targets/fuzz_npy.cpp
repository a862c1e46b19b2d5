// .npy decoding (io/npy.cpp, io/npy_header.cpp). An accepted file must
// survive encode -> decode unchanged: same dtype, shape and bytes.
#include <cstring>

#include "fuzz_common.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace mha;
  fuzz::run_expecting_input_errors([&] {
    Tensor t = io::detail::decode_npy(fuzz::as_view(data, size), "fuzz.npy");
    Tensor back = io::detail::decode_npy(io::detail::encode_npy(t), "round trip");
    fuzz::require(back.dtype() == t.dtype() && back.shape() == t.shape(), "round trip changed dtype or shape");
    fuzz::require(back.nbytes() == t.nbytes() && (t.nbytes() == 0 || std::memcmp(back.raw(), t.raw(), t.nbytes()) == 0),
                  "round trip changed the data");
  });
  return 0;
}
