// Issue 10, "Data loss": every output of every command is checked before the
// work, never overwrites an input, and is written all or nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/tensor_file.h"
#include "support/test_support.h"

namespace mha::test {
namespace {

namespace fs = std::filesystem;

class Outputs : public ::testing::Test {
 protected:
  void SetUp() override {
    Tensor x = Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6});
    io::write_npy(path("ref.npy"), x);
    io::write_npy(path("x.npy"), io::read_npy(source_dir() + "/data/your_journey_batch2.npy"));
    write_text(path("c.json"), R"({"variant": "mha_causal",
      "params": {"d_in": 3, "d_out": 2, "context_length": 6, "dropout": 0.0, "num_heads": 2},
      "weights": {"init": "torch", "seed": 123}, "inputs": {"x": "x.npy"}})");
  }
  std::string path(const std::string& name) const { return dir_.file(name); }
  std::string q(const std::string& name) const { return shell_quote(path(name)); }
  CommandResult run(const std::string& flags) { return run_mha("run -n 1 -c " + q("c.json") + " " + flags); }
  static int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }
  static void expect_refused(const CommandResult& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
  // Every file in the folder, hidden temporaries included.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_.path())) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  TempDir dir_;
};

TEST_F(Outputs, CompareJsonOntoItsOwnInputIsRefused) {
  const std::string before = read_text(path("ref.npy"));
  expect_refused(run_mha("compare " + q("ref.npy") + " " + q("ref.npy") + " --json " + q("ref.npy")),
                 "is the same file as the input");
  EXPECT_EQ(read_text(path("ref.npy")), before);
  // The same file under another name: a hard link.
  fs::create_hard_link(path("ref.npy"), path("link.npy"));
  expect_refused(run_mha("compare " + q("ref.npy") + " " + q("ref.npy") + " --json " + q("link.npy")),
                 "is the same file as the input");
  EXPECT_EQ(read_text(path("ref.npy")), before);
}

TEST_F(Outputs, RunOutputsOntoTheConfigOrAnInputAreRefused) {
  const std::string config = read_text(path("c.json")), x = read_text(path("x.npy"));
  expect_refused(run("--json " + q("c.json")), "--json");
  expect_refused(run("--output " + q("x.npy")), "is the same file as the input");
  expect_refused(run("--attn-weights " + shell_quote(dir_.path() + "/./x.npy")), "is the same file as the input");
  expect_refused(run("-o " + q("o.npy") + " --json " + q("o.npy")), "is the same file as --output");
  EXPECT_EQ(read_text(path("c.json")), config);
  EXPECT_EQ(read_text(path("x.npy")), x);
}

TEST_F(Outputs, SaveWeightsFormatFollowsTheName) {
  expect_refused(run("--save-weights " + q("w.npy")), "expected a file name ending in .safetensors or .npz");
  EXPECT_FALSE(fs::exists(path("w.npy")));
  ASSERT_EQ(run("--save-weights " + q("w.npz")).exit_code, 0);
  EXPECT_EQ(read_text(path("w.npz")).substr(0, 2), "PK");
  ASSERT_EQ(run("--save-weights " + q("w.safetensors")).exit_code, 0);
  EXPECT_EQ(io::read_safetensors(path("w.safetensors")).size(), io::read_npz(path("w.npz")).size());
}

TEST_F(Outputs, AFailingOutputLeavesNoOtherBehind) {
  expect_refused(run("-o " + q("good.npy") + " --json " + q("nodir/r.json")), "nodir");
  EXPECT_FALSE(fs::exists(path("good.npy")));
  // No temporaries left either.
  EXPECT_EQ(listing(), (std::vector<std::string>{"c.json", "ref.npy", "x.npy"}));
}

TEST_F(Outputs, DumpStagesOntoAFileOrUnwritableFolderIsAnInputError) {
  write_text(path("taken"), "keep");
  expect_refused(run("--dump-stages " + q("taken")), "exists and is not a folder");
  EXPECT_EQ(read_text(path("taken")), "keep");
  expect_refused(run("--dump-stages /proc/mha-stages"), "cannot write in folder");
  ASSERT_EQ(run("--dump-stages " + q("st")).exit_code, 0);
  EXPECT_TRUE(fs::exists(path("st/q.npy")));
  EXPECT_TRUE(fs::exists(path("st/output.npy")));
  // A stage file that another output also names is refused, and nothing is written.
  fs::remove_all(path("st"));
  fs::create_directory(path("st"));
  expect_refused(run("--dump-stages " + q("st") + " -o " + q("st/q.npy")), "is the same file as");
  EXPECT_TRUE(fs::is_empty(path("st")));
}

TEST_F(Outputs, RunWritesEveryOutputOnSuccess) {
  CommandResult r = run("-o " + q("o.npy") + " --attn-weights " + q("a.npy") + " --json " + q("r.json") +
                        " --save-weights " + q("w.safetensors") + " --dump-stages " + q("st"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(io::read_npy(path("o.npy")).shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(io::read_npy(path("a.npy")).shape(), (Shape{2, 2, 6, 6}));
  EXPECT_EQ(nlohmann::json::parse(read_text(path("r.json")))["output"]["shape"], nlohmann::json({2, 6, 2}));
  EXPECT_EQ(listing(), (std::vector<std::string>{"a.npy", "c.json", "o.npy", "r.json", "ref.npy", "st",
                                                 "w.safetensors", "x.npy"}));
}

const char* kTinyBench = "bench --hidden 16 --heads 2 -r 1 --warmup 0 --no-progress";

TEST_F(Outputs, BenchChecksItsOutputBeforeRunningRows) {
  // With progress on: a bench that started would have drawn its progress
  // bar on stderr before its error line.
  CommandResult r = run_mha("bench --hidden 16 --heads 2 -r 1 --warmup 0 --seq 8 --output " + q("nodir/x.md"));
  expect_refused(r, "nodir");
  EXPECT_EQ(r.out, "");
  write_text(path("suite.json"), R"([{"variant": "torch_mha", "seq": 8, "hidden": 16, "heads": 2}])");
  expect_refused(run_mha("bench --no-progress -r 1 --suite " + q("suite.json") + " --output " + q("suite.json")),
                 "is the same file as the input");
}

TEST_F(Outputs, BenchJsonlKeepsRowsThatFinishedBeforeAFailure) {
  // The second row fails after the first has run (a q4_0 cache needs heads
  // 32 wide, which its session finds out): the first row is in the file.
  CommandResult r = run_mha("bench --variant llama_attention -p 0 -n 1 --kv-cache float32,q4_0 --hidden 16 --heads 2 "
                            "-r 1 --warmup 0 --probes none --no-progress -o jsonl --output " + q("rows.jsonl"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::string text = read_text(path("rows.jsonl"));
  ASSERT_GE(lines(text), 1) << r.err;
  EXPECT_EQ(nlohmann::json::parse(text.substr(0, text.find('\n')))["cache_dtype"], "float32");
  r = run_mha(std::string(kTinyBench) + " --seq 8,16 -o jsonl --output " + q("two.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines(read_text(path("two.jsonl"))), 2);
}

}  // namespace
}  // namespace mha::test
