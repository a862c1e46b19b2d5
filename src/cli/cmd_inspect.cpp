#include "cli/commands.h"
#include "util/error.h"

namespace mha::cli {

void add_inspect(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("inspect", "(not yet available)");
  sub->callback([&exit_code]() {
    exit_code = 2;
    throw InputError("'mha inspect' is not implemented yet");
  });
}

}  // namespace mha::cli
