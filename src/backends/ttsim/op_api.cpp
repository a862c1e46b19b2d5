#include "backends/ttsim/op_api.h"

#include "backends/ttsim/ttsim_device.h"
#include "backends/ttsim/ops/data_movement/data_movement.h"
#include "util/error.h"

namespace mha::ttsim {

Tensor tt_move(const Tensor& in, DataFormat in_format, const Tensor& moved, DataFormat out_format,
               const std::string& op) {
  return to_tensor(tt_move_tiles(in, in_format, moved, out_format, op));
}

TileTensor tt_move_tiles(const Tensor& in, DataFormat in_format, const Tensor& moved, DataFormat out_format,
                         const std::string& op) {
  if (in.numel() != moved.numel())
    throw InputError(op + ": the result " + shape_str(moved.shape()) + " holds " + std::to_string(moved.numel()) +
                     " values, the input " + shape_str(in.shape()) + " " + std::to_string(in.numel()));
  if (in.ndim() == 0 || moved.ndim() == 0 || in.numel() == 0)
    throw InputError(op + ": expected tensors with at least one dimension and one element");
  const Tensor src = in.cast(DType::F32), dst = moved.cast(DType::F32);
  TtDevice dev(parse_tt_options(nlohmann::ordered_json::object(), "op options"));
  const TileTensor t = to_tile_layout(src, in_format);
  const float* v = dst.data<float>();
  DataMovementAttributes attrs;
  attrs.output = out_format;
  attrs.shape = dst.shape();
  return run_data_movement(dev, op, t, std::vector<float>(v, v + dst.numel()), attrs);
}

}  // namespace mha::ttsim
