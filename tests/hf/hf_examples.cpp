#include "hf/hf_examples.h"

#include <algorithm>
#include <memory>

namespace mha::test {

const std::string& hf_examples() {
  static std::unique_ptr<TempDir> dir;
  static std::string path;
  if (!dir) {
    dir = std::make_unique<TempDir>();
    path = dir->file("examples");
    const CommandResult r = run_command("/usr/bin/python3 " + shell_quote(source_dir() + "/scripts/make_hf_example.py") +
                                        " " + shell_quote(path));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  return path;
}

nlohmann::json hf_inspect(const std::string& dir) {
  const CommandResult r = run_mha("inspect --json " + shell_quote(dir));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

void expect_one_line_error(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("mha: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

}  // namespace mha::test
