#include "cli/commands.h"
#include "util/error.h"

namespace mha::cli {

void add_bench(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("bench", "(not yet available)");
  sub->callback([&exit_code]() {
    exit_code = 2;
    throw InputError("'mha bench' is not implemented yet");
  });
}

}  // namespace mha::cli
