#pragma once
// Data movement on the emulated device (reshape, permute, split heads,
// concat heads, typecast, nlp_create_qkv_heads, nlp_concat_heads): the
// values move exactly; a block-float result is repacked as the device's
// transpose / untilize-retilize kernels pack it.
#include <string>
#include <vector>

#include "backends/ttsim/ops/device_op.h"
#include "ttsim/formats.h"

namespace mha::ttsim {

struct DataMovementAttributes {
  DataFormat output = DataFormat::Bfloat16;
  Shape shape;  // the result's logical shape
  template <class V>
  void fields(V& v) {
    v("out", output, "the result's dtype", fields::kDerived);
    v("shape", shape, "the result's shape", fields::kDerived);
  }
};

// `values` are the logical row-major values of the result. bf16/fp32 values
// move exactly; block-float results are repacked by the packer: 16-bit Dst,
// pack source Bfp8_b (those ops take no compute config, so
// bfp8_pack_precise is TT-NN's default, false).
TileTensor run_data_movement(TtDevice& dev, const std::string& op, const TileTensor& in,
                             const std::vector<float>& values, const DataMovementAttributes& attrs);

// ttnn.typecast: x repacked to `out` through a 16-bit Dst (exact for a
// format at least as wide as x's values); x itself when it is in `out`.
TileTensor run_typecast(TtDevice& dev, const TileTensor& x, DataFormat out);

// The head-split ops' attributes (nlp_create_qkv_heads[_decode]).
struct HeadsAttributes {
  int64_t num_heads = 0, num_kv_heads = 0;
  template <class V>
  void fields(V& v) {
    v("num_heads", num_heads, "query heads", fields::kDerived);
    v("num_kv_heads", num_kv_heads, "key/value heads", fields::kDerived);
  }
};

// A whole-tile head split or concat whose result `t` the caller built:
// registered as one program over `in` (keyed on `key`), its memory checked.
TileTensor run_head_movement(TtDevice& dev, const std::string& op, const std::string& key, const TileTensor& in,
                             TileTensor t);

}  // namespace mha::ttsim
