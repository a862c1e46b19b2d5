#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "config/hf_config.h"
#include "io/inspect.h"

namespace mha::cli {

void add_inspect(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand(
      "inspect", "Show dtype, shape and statistics of every tensor in a .npy, .npz, .safetensors or folder of .npy, "
      "or each layer's attention of a Hugging Face model folder");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  sub->add_option("file", *path, "tensor file or folder of .npy files")->required();
  sub->add_flag("--json", *json, "print JSON for machines");
  sub->callback([path, json, &exit_code]() {
    // A Hugging Face model folder: what each layer's attention is.
    if (is_hf_folder(*path)) {
      const std::string text = format_hf_inspect(*path, *json);
      std::fwrite(text.data(), 1, text.size(), stdout);
      exit_code = 0;
      return;
    }
    const auto stats = io::inspect_path(*path);
    const std::string text = *json ? io::format_stats_json(*path, stats) : io::format_stats_table(stats);
    std::fwrite(text.data(), 1, text.size(), stdout);
    exit_code = 0;
  });
}

}  // namespace mha::cli
