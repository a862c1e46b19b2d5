#include "model/spec_fields.h"

namespace mha {

AttentionSpec spec_as_f32(const AttentionSpec& s) {
  AttentionSpec r = s;  // Tensors share their bytes: only the float64 ones are copied below
  r.uid = new_spec_uid();
  visit_spec(r, [](const char*, auto& field, HeadLayout) {
    for_each_tensor(field, [](Tensor& t) {
      if (t.dtype() == DType::F64) t = t.cast(DType::F32);
    });
  });
  return r;
}

bool spec_holds_f64(const AttentionSpec& s) {
  bool f64 = false;
  visit_spec(s, [&](const char*, const auto& field, HeadLayout) {
    for_each_tensor(field, [&](const Tensor& t) { f64 = f64 || t.dtype() == DType::F64; });
  });
  return f64;
}

}  // namespace mha
