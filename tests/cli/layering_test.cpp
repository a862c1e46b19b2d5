// The folders of src/ form layers, and an include only points down: a
// folder includes its own files and those of lower layers, never a folder
// above it or beside it. The table below is the architecture README draws;
// a new folder must take its place here, so an arrow back up (run/ including
// parallel/, say) fails this test instead of growing unnoticed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "support/test_support.h"

namespace mha::test {
namespace {

namespace fs = std::filesystem;

// Lower numbers sit lower. Folders of one layer do not include each other.
const std::map<std::string, int>& layers() {
  static const std::map<std::string, int> l = {
      {"util", 0},     {"vec", 0},     {"tensor", 1},   {"compare", 2}, {"init", 2},
      {"io", 2},       {"model", 2},   {"ttsim", 2},    {"backends", 3}, {"variants", 3},
      {"hf", 4},       {"config", 5},  {"run", 6},      {"parallel", 7}, {"bench", 8},
      {"cli", 9},
  };
  return l;
}

TEST(Layering, IncludesPointOnlyDown) {
  const std::regex include(R"re(^\s*#\s*include\s+"([a-z_0-9]+)/)re");
  int checked = 0;
  for (const auto& folder : fs::directory_iterator(source_dir() + "/src")) {
    if (!folder.is_directory()) continue;
    const std::string from = folder.path().filename().string();
    auto at = layers().find(from);
    ASSERT_NE(at, layers().end()) << "src/" << from << " has no layer in tests/cli/layering_test.cpp";
    for (const auto& f : fs::recursive_directory_iterator(folder.path())) {
      if (!f.is_regular_file()) continue;
      std::ifstream in(f.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string to = m[1];
        auto target = layers().find(to);
        if (target == layers().end() || to == from) continue;  // a file of its own, or not a src/ folder
        ++checked;
        EXPECT_LT(target->second, at->second)
            << f.path().lexically_relative(source_dir()).string() << ":" << n << " includes " << to << "/ ("
            << "layer " << target->second << ") from " << from << "/ (layer " << at->second << ")";
      }
    }
  }
  EXPECT_GT(checked, 100) << "includes found";
}

}  // namespace
}  // namespace mha::test
