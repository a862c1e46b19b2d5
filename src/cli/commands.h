#pragma once
// Subcommands of the mha binary. Each add_* declares its flags once and sets
// `exit_code` from its callback; main() maps exceptions to exit codes.
#include <CLI/CLI.hpp>

namespace mha::cli {

void add_compare(CLI::App& app, int& exit_code);
void add_inspect(CLI::App& app, int& exit_code);
void add_run(CLI::App& app, int& exit_code);
void add_bench(CLI::App& app, int& exit_code);
void add_op(CLI::App& app, int& exit_code);

}  // namespace mha::cli
