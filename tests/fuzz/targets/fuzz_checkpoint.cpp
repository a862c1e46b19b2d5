// Checkpoint indexes with a prefix (io/checkpoint_index.cpp, io/checkpoint.cpp,
// run/checkpoint_weights.cpp): the input's first line is weights.prefix (empty:
// none), the rest model.safetensors.index.json. The index sits in a folder of
// shards written once per process from torch_mha's weights: shard 1 holds
// layer "model.layers.0.attn." in bfloat16, shard 2 the same layer's output
// projection in float32 with a wrong shape plus an extra tensor, shard 3 is
// not a safetensors file, and "fifo.safetensors" is a FIFO (refused without
// blocking). A 10 s timeout catches a FIFO opened or a quadratic path.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "fuzz_common.h"
#include "io/tensor_file.h"
#include "run/checkpoint_weights.h"
#include "variants/variant.h"

namespace {

struct Folder {
  std::string dir;
  std::unique_ptr<mha::Variant> variant;
  Folder() {
    char tmpl[] = "/tmp/mha-fuzz-checkpoint-XXXXXX";
    dir = ::mkdtemp(tmpl);
    variant = mha::make_variant("torch_mha", mha::ordered_json::parse(R"({"embed_dim": 4, "num_heads": 2})"));
    mha::NamedTensors one, two;
    for (auto& [name, t] : variant->init_torch(1)) {
      one.emplace_back("model.layers.0.attn." + name, t.cast(mha::DType::BF16));
      if (name == "out_proj.weight") two.emplace_back("model.layers.1.attn." + name, mha::Tensor::from_f32({2, 8}, std::vector<float>(16, 1.0f)));
    }
    two.emplace_back("model.layers.1.attn.extra", mha::Tensor::from_f32({1}, {0.5f}));
    mha::io::write_safetensors(dir + "/model-00001-of-00003.safetensors", one);
    mha::io::write_safetensors(dir + "/model-00002-of-00003.safetensors", two);
    std::ofstream(dir + "/model-00003-of-00003.safetensors") << "not a safetensors file";
    ::mkfifo((dir + "/fifo.safetensors").c_str(), 0600);
  }
  ~Folder() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static Folder folder;
  const std::string_view in = mha::fuzz::as_view(data, size);
  const std::size_t nl = in.find('\n');
  const std::string prefix(in.substr(0, nl == std::string_view::npos ? 0 : nl));
  const std::string_view index = nl == std::string_view::npos ? in : in.substr(nl + 1);
  const std::string path = folder.dir + "/model.safetensors.index.json";
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(index.data(), static_cast<std::streamsize>(index.size()));
  }
  mha::fuzz::run_expecting_input_errors([&] {
    const mha::TensorMap w = mha::load_checkpoint_weights(*folder.variant, path,
                                                          prefix.empty() ? std::nullopt : std::optional<std::string>(prefix));
    for (const mha::WeightSlot& slot : folder.variant->weight_slots())
      if (!slot.buffer) mha::fuzz::require(w.count(slot.name) && w.at(slot.name).shape() == slot.shape, "bound weight has its slot's shape");
  });
  return 0;
}
