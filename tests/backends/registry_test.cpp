// The backend table (backends/registry.h): make_backend, the names in
// messages and the CLI's help all come from it, and a test can register a
// backend of its own.
#include <gtest/gtest.h>

#include <stdexcept>

#include "backends/registry.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha {
namespace {

// Returns its input's query as the output: enough to see that make_backend
// built this backend with the options it was given.
class EchoBackend : public Backend {
 public:
  explicit EchoBackend(std::string tag) : tag_(std::move(tag)) {}
  std::string name() const override { return "test-echo"; }
  AttentionResult run(const AttentionSpec&, const AttentionInputs& in, const RunOptions&) override {
    return {in.query, std::nullopt, {}};
  }
  nlohmann::json describe() const override { return {{"tag", tag_}}; }

 private:
  std::string tag_;
};

TEST(BackendRegistry, BuiltInsInOrder) {
  std::vector<std::string> names;
  for (const BackendEntry& e : backend_registry()) {
    names.push_back(e.name);
    EXPECT_FALSE(e.description.empty()) << e.name;
  }
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3),
            (std::vector<std::string>{"reference", "cpu", "tt-sim"}));
  for (const char* n : {"reference", "cpu", "tt-sim"})
    EXPECT_EQ(make_backend(n, nlohmann::ordered_json::object(), "backend")->name(), n);
}

TEST(BackendRegistry, RegisteredBackendIsKnownEverywhere) {
  register_backend("test-echo", "returns its query", [](const nlohmann::ordered_json& o, const std::string& path) {
    if (!o.contains("tag")) throw InputError(path + ".tag: required key is missing");
    return std::make_unique<EchoBackend>(o["tag"].get<std::string>());
  });
  auto b = make_backend("test-echo", {{"tag", "t1"}}, "backend");
  EXPECT_EQ(b->describe()["tag"], "t1");
  std::mt19937 g(3);
  AttentionInputs in;
  in.query = test::rand_tensor(g, {1, 2, 3}, -1, 1);
  const Tensor out = b->run(AttentionSpec{}, in, RunOptions{}).output;
  EXPECT_TRUE(test::tensors_close(out, in.query, 0, 0));
  EXPECT_NE(backend_names().find("test-echo"), std::string::npos);
  EXPECT_NE(backend_help().find("test-echo (returns its query)"), std::string::npos);
  try {
    make_backend("nope", nlohmann::ordered_json::object(), "backend");
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of reference, cpu, tt-sim, test-echo"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_backend("test-echo", nlohmann::ordered_json::object(), "backend"), InputError);
  EXPECT_THROW(register_backend("cpu", "again", nullptr), std::logic_error);
}

TEST(BackendRegistry, CliHelpListsEveryBackend) {
  for (const char* cmd : {"run --help", "bench --help"}) {
    const auto r = test::run_mha(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const BackendEntry& e : backend_registry())
      if (e.name != "test-echo") {
        EXPECT_NE(r.out.find(e.name + " (" + e.description + ")"), std::string::npos) << cmd;
      }
  }
}

}  // namespace
}  // namespace mha
