// Regression tests for issue 10's "parsers under attack" findings on JSON
// inputs (configs, bench suites, --backend-option) and on echoed user text.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "backends/backend.h"
#include "config/config.h"
#include "util/json_util.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/text.h"

using namespace mha;
using namespace mha::test;

namespace {

const char* kBody =
    R"("variant": "mha_causal", "params": {"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0, "num_heads": 2})";

void expect_one_line_exit2(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err.substr(0, 500);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "expected one line: " << r.err.substr(0, 500);
}

CommandResult run_config_text(const TempDir& dir, const std::string& text) {
  write_text(dir.file("c.json"), text);
  return run_mha("run -n 1 --config " + shell_quote(dir.file("c.json")));
}

std::string deep(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

}  // namespace

// 1e400 overflows a double: nlohmann throws out_of_range, which escaped as
// "internal error", exit 3.
TEST(HostileConfig, NumberOverflowIsAnInputError) {
  TempDir dir;
  expect_one_line_exit2(run_config_text(dir, std::string("{") + kBody + R"(, "runs": {"warmup": 1e400}})"),
                        "invalid JSON");
  expect_one_line_exit2(run_config_text(dir, "1e400"), "c.json: invalid JSON");
  write_text(dir.file("s.json"), R"([{"variant": "mha", "batch": 1e400}])");
  expect_one_line_exit2(run_mha("bench --suite " + shell_quote(dir.file("s.json"))), "s.json: invalid JSON");
}

// 100,000 levels of nesting overflowed the stack (SIGSEGV) in 7 of 11
// placements: in parsing, in parse_config's copies and in json_brief's dump.
TEST(HostileConfig, DeepNestingIsRefusedInEveryPlacement) {
  TempDir dir;
  const std::string d = deep(100000);
  const std::vector<std::string> configs = {
      d,
      std::string("{") + kBody + ", \"name\": " + d + "}",
      R"({"variant": )" + d + "}",
      R"({"variant": "mha_causal", "params": {"d_in": )" + d + "}}",
      std::string("{") + kBody + ", \"params2\": " + d + "}",
      std::string("{") + kBody + ", \"weights\": " + d + "}",
      std::string("{") + kBody + ", \"inputs\": {\"x\": " + d + "}}",
      std::string("{") + kBody + ", \"inputs\": {\"x\": {\"rand\": " + d + "}}}",
      std::string("{") + kBody + ", \"options\": {\"o\": " + d + "}}",
      std::string("{") + kBody + ", \"backend\": {\"name\": \"cpu\", \"threads\": " + d + "}}",
      std::string("{") + kBody + ", \"reference\": {\"file\": " + d + "}}",
  };
  for (std::size_t i = 0; i < configs.size(); ++i) {
    SCOPED_TRACE("placement " + std::to_string(i));
    expect_one_line_exit2(run_config_text(dir, configs[i]), "nests deeper than 64 levels");
  }
  write_text(dir.file("s.json"), "[" + d + "]");
  expect_one_line_exit2(run_mha("bench --suite " + shell_quote(dir.file("s.json"))), "nests deeper than 64 levels");
  // (a command-line argument is at most 128 KiB, hence fewer levels here)
  expect_one_line_exit2(run_mha("bench -r 1 --variant mha --seq 4 --hidden 8 --heads 2 --backend-option threads=" + deep(30000)),
                        "--backend-option: value nests deeper than 64 levels");
  // Depth 64 itself is fine as far as nesting goes (then refused for its type).
  expect_one_line_exit2(run_config_text(dir, std::string("{") + kBody + ", \"options\": {\"need_weights\": " +
                                                 deep(62) + "}}"),
                        "options.need_weights: expected true or false, found an array");
}

// A value nested deeply built in code (not read from text) must not recurse
// either: parse_config refuses it, json_brief shows two levels.
TEST(HostileConfig, DeepValuesBuiltInCodeDoNotRecurse) {
  ordered_json v = 1;
  for (int i = 0; i < 200000; ++i) {
    ordered_json outer = ordered_json::array();
    outer.push_back(std::move(v));
    v = std::move(outer);
  }
  EXPECT_EQ(json_depth(v), 200000);
  EXPECT_EQ(json_brief(v), "[[[...]]]");
  ordered_json cfg = ordered_json::object();
  cfg["variant"] = "mha_causal";
  cfg["params"] = ordered_json::object();
  cfg["params"]["x"] = std::move(v);
  try {
    parse_config(cfg, ".", "c.json");
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "config: nests deeper than 64 levels");
  }
}

// A 1 GB unknown key gave a 1 GB stderr line; newlines and escape sequences
// in a key reached the terminal.
TEST(HostileConfig, EchoedKeysAreEscapedAndCut) {
  TempDir dir;
  const std::string key = "evil\n\x1b[31mred\x1b[0m\r\x07" + std::string(1 << 20, 'k');
  auto r = run_config_text(dir, std::string("{") + kBody + ", " + ordered_json(key).dump() + ": 1}");
  expect_one_line_exit2(r, "config.evil\\x0a\\x1b[31mred\\x1b[0m\\x0d\\x07kkk");
  EXPECT_LT(r.err.size(), 400u) << r.err.substr(0, 500);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  // Same for a params key (checked by the variant) and an input name.
  r = run_config_text(dir, R"({"variant": "mha_causal", "params": {)" + ordered_json(key).dump() + ": 1}}");
  expect_one_line_exit2(r, "params.evil\\x0a\\x1b[31m");
  EXPECT_LT(r.err.size(), 400u);
  r = run_config_text(dir, R"({"variant": )" + ordered_json(key).dump() + "}");
  expect_one_line_exit2(r, "unknown variant 'evil\\x0a");
  EXPECT_LT(r.err.size(), 600u);
}

TEST(EchoedText, PrintableEscapesControlsAndCuts) {
  EXPECT_EQ(printable("plain ascii"), "plain ascii");
  EXPECT_EQ(printable("a\nb\tc\x1b[2J\x7f"), "a\\x0ab\\x09c\\x1b[2J\\x7f");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // valid UTF-8 kept
  EXPECT_EQ(printable("\xc2\x9b" "31m"), "\\xc2\\x9b31m");                      // C1 CSI escaped
  EXPECT_EQ(printable("\xff\xc3"), "\\xff\\xc3");                               // invalid UTF-8
  EXPECT_EQ(printable("\xe2\x80\xa8"), "\\xe2\\x80\\xa8");                      // U+2028 line separator
  EXPECT_EQ(printable(std::string(100, 'x')), std::string(80, 'x') + "...");
  EXPECT_EQ(printable(std::string(80, 'x')), std::string(80, 'x'));
  EXPECT_EQ(printable("abcdef", 3), "abc...");
  EXPECT_EQ(printable_line("already \\x0a escaped\n"), "already \\x0a escaped\\x0a");
}

// Found by the config fuzzer (10M-execution run): a backend name with a
// newline made "unknown backend '...'" two lines. Every name a backend or
// tt-sim option echoes goes through printable().
TEST(HostileConfig, EchoedBackendNamesAndValuesAreEscaped) {
  const std::string evil = "bb\b\n\x1b[31mtt-sim";
  auto one_line = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no InputError";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
      EXPECT_NE(m.find(needle), std::string::npos) << m;
    }
  };
  one_line([&] { make_backend(evil, ordered_json::object(), "backend"); }, "unknown backend 'bb\\x08\\x0a\\x1b[31mtt-sim'");
  one_line([&] { make_backend("reference", ordered_json{{evil, 1}}, "backend"); }, "backend.bb\\x08\\x0a");
  one_line([&] { make_backend("tt-sim", ordered_json{{"numerics", evil}}, "backend"); }, "unknown numerics 'bb\\x08\\x0a");
  one_line([&] { make_backend("tt-sim", ordered_json{{"kernels", evil}}, "backend"); }, "backend.kernels: expected \"auto\", \"scalar\", \"avx512\" or \"avx2\", found \"bb\\x08\\x0a");
  TempDir dir;
  auto r = run_config_text(dir, std::string("{") + kBody + R"(, "inputs": {"seed": 0, "x": {"rand": [1, 4, 3]}},)" +
                                    R"( "backend": {"name": )" + ordered_json(evil).dump() + "}}");
  expect_one_line_exit2(r, "unknown backend 'bb\\x08\\x0a");
}
