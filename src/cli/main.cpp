// mha: the command-line front end. It only parses flags and maps errors to
// exit codes; all work happens in the library (src/ outside cli/).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "parallel/world.h"
#include "util/error.h"
#include "util/text.h"

// Diagnostics go to stderr so that stdout stays the tensor/report output;
// MHA_LOG=debug|info|warn|error picks the level (default warn).
static void setup_logging() {
  auto logger = spdlog::stderr_color_mt("mha");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("mha: %l: %v");
  const char* level = std::getenv("MHA_LOG");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
}

int main(int argc, char** argv) {
  mha::parallel::MpiSession mpi(&argc, &argv);  // MPI only when launched by mpirun
  setup_logging();
  // Only `mha run`, `mha bench` and `mha op` split their work across ranks;
  // any other command would run N times over and print N reports.
  const std::string cmd = argc >= 2 ? argv[1] : "";
  if (mha::parallel::size() > 1 && cmd != "run" && cmd != "bench" && cmd != "op") {
    if (mha::parallel::rank() == 0)
      std::fprintf(stderr, "mha: error: only `mha run`, `mha bench` and `mha op` run across MPI ranks (launched on %d)\n",
                   mha::parallel::size());
    return 2;
  }
  CLI::App app{"mha: run, benchmark and compare multi-head attention"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mha 0.1.0");
  int exit_code = 0;
  mha::cli::add_compare(app, exit_code);
  mha::cli::add_inspect(app, exit_code);
  mha::cli::add_run(app, exit_code);
  mha::cli::add_bench(app, exit_code);
  mha::cli::add_op(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // CLI11 prints two lines without the project's prefix; flag errors are
    // input errors like any other: one line, exit code 2.
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    while (!msg.empty() && msg.back() == ' ') msg.pop_back();
    if (mha::parallel::rank() == 0) std::fprintf(stderr, "mha: error: %s (see mha --help)\n", msg.c_str());
    return 2;
  } catch (const mha::InputError& e) {
    // Under mpirun the other ranks' errors reach rank 0 (parallel::agree),
    // which prints the one line.
    if (mha::parallel::rank() != 0) return 2;
    std::fprintf(stderr, "mha: error: %s\n", mha::printable_line(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "mha: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mha: internal error: %s\n", mha::printable_line(e.what()).c_str());
    return 3;
  }
  return exit_code;
}
