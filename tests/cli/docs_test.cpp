// The docs a new user reads stand alone and cover what the tool takes: every
// config listed, every config key documented, no pointer to files outside the
// repository; every link and every repository path they cite resolves; the
// README stays a front door whose "Extending mha" recipes name files and
// functions that exist; and scripts/test.sh's `-LE 'slow|numeric'` excludes tests that
// really carry those labels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace mha::test {
namespace {

namespace fs = std::filesystem;

// README.md and every page under docs/, by path relative to the repository.
std::vector<std::string> doc_pages() {
  std::vector<std::string> pages = {"README.md"};
  for (const auto& e : fs::directory_iterator(source_dir() + "/docs"))
    if (e.path().extension() == ".md") pages.push_back("docs/" + e.path().filename().string());
  std::sort(pages.begin(), pages.end());
  return pages;
}

// The text outside ``` fences, with each fenced line blanked (line numbers kept).
std::string outside_fences(const std::string& md) {
  std::string out;
  bool fenced = false;
  size_t pos = 0;
  while (pos < md.size()) {
    size_t end = md.find('\n', pos);
    if (end == std::string::npos) end = md.size();
    const std::string line = md.substr(pos, end - pos);
    const size_t first = line.find_first_not_of(' ');
    const bool fence = first != std::string::npos && line.compare(first, 3, "```") == 0;
    if (fence) fenced = !fenced;
    out += (fence || fenced) ? "" : line;
    out += '\n';
    pos = end + 1;
  }
  return out;
}

// Inline code spans (`...`) of text outside fences, taken paragraph by
// paragraph so that one stray backtick cannot swallow the rest of a page.
std::vector<std::string> code_spans(const std::string& md) {
  std::vector<std::string> spans;
  const std::string text = outside_fences(md);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) end = text.size();
    const std::string para = text.substr(pos, end - pos);
    size_t open = para.find('`');
    while (open != std::string::npos) {
      const size_t close = para.find('`', open + 1);
      if (close == std::string::npos) break;
      spans.push_back(para.substr(open + 1, close - open - 1));
      open = para.find('`', close + 1);
    }
    pos = end + 2;
  }
  return spans;
}

// A heading's anchor as GitHub makes it: lower case, spaces to hyphens,
// every other character but letters, digits, '-' and '_' dropped.
std::string slug(const std::string& heading) {
  std::string s;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_') s += static_cast<char>(std::tolower(c));
    else if (c == ' ') s += '-';
  }
  return s;
}

// Every anchor of a page: one per heading, repeats numbered as GitHub does.
std::set<std::string> anchors(const std::string& md) {
  std::set<std::string> out;
  std::map<std::string, int> seen;
  const std::string text = outside_fences(md);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    if (!line.empty() && line[0] == '#') {
      const size_t text_start = line.find_first_not_of("# ");
      const std::string base = slug(text_start == std::string::npos ? "" : line.substr(text_start));
      const int n = seen[base]++;
      out.insert(n == 0 ? base : base + "-" + std::to_string(n));
    }
    pos = end + 1;
  }
  return out;
}

// A repository path a page cites in a code span (its first word), or ""
// when the span is no such path: another repository's (tt-metal's tests/ttnn,
// ttsim's src/tensix.cpp), a pattern (op_*.cpp, <name>, {h,cpp}) or prose.
std::string cited_path(const std::string& span) {
  std::string p = span.substr(0, span.find_first_of(" \n"));
  while (!p.empty() && (p.back() == ',' || p.back() == ':' || p.back() == '.' || p.back() == ')')) p.pop_back();
  if (p.find_first_of("*<>{}$") != std::string::npos || p.find("NAME") != std::string::npos ||
      p.find("...") != std::string::npos)
    return "";
  for (const char* top : {"scripts/", "bench/", "configs/", "data/", "docs/", ".ci/"})
    if (p.rfind(top, 0) == 0) return p;
  for (const char* top : {"src/", "tests/"}) {
    if (p.rfind(top, 0) != 0) continue;
    const size_t slash = p.find('/', std::string(top).size());
    if (slash == std::string::npos) return "";  // src/FILE: no file of ours sits there
    if (!fs::is_directory(source_dir() + "/" + p.substr(0, slash))) return "";  // another repository's folder
    return p;
  }
  return "";
}

// Whether `word` occurs in `text` as a whole identifier.
bool has_word(const std::string& text, const std::string& word) {
  const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const size_t end = at + word.size();
    if ((at == 0 || !ident(text[at - 1])) && (end == text.size() || !ident(text[end]))) return true;
  }
  return false;
}

TEST(Docs, ReadmeListsEveryConfigAndLinksConfigMd) {
  const std::string readme = read_text(source_dir() + "/README.md");
  for (const auto& e : fs::directory_iterator(source_dir() + "/configs"))
    EXPECT_NE(readme.find(e.path().filename().string()), std::string::npos) << e.path().filename();
  EXPECT_NE(readme.find("(docs/CONFIG.md)"), std::string::npos);
  EXPECT_NE(readme.find("--compare-stages"), std::string::npos);
  EXPECT_NE(readme.find("threads=2"), std::string::npos);
}

// What docs/RUN.md says of `mha run -n 0` is what CiSurface.ZeroIterationsRunsOnce
// checks the binary does: the first run only, no warm-up.
TEST(Docs, RunMdSaysMinusNZeroRunsTheFirstRunOnly) {
  const std::string run_md = read_text(source_dir() + "/docs/RUN.md");
  EXPECT_NE(run_md.find("`-n 0` makes the first run the only one, with no warm-up"), std::string::npos);
  EXPECT_NE(run_md.find("cached runs: none (iterations 0)"), std::string::npos);
  EXPECT_EQ(run_md.find("`-n` must be at least 1"), std::string::npos);
  const CommandResult r = run_mha("run --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("0: the first run only"), std::string::npos) << r.out;
}

TEST(Docs, NoPointerToTheSpecOutsideTheRepository) {
  for (const char* f : {"/README.md", "/docs/CONFIG.md", "/docs/COMPARE.md", "/docs/RUN.md", "/docs/BENCH.md",
                        "/docs/MPI.md", "/docs/BUILD.md", "/src/config/config.h"})
    EXPECT_EQ(read_text(source_dir() + f).find("SPEC"), std::string::npos) << f;
}

TEST(Docs, ConfigMdDocumentsEveryKey) {
  const std::string doc = read_text(source_dir() + "/docs/CONFIG.md");
  for (const char* key : {"`name`", "`variant`", "`params`", "`weights`", "`inputs`", "`options`", "`backend`", "`runs`",
                          "`reference`", "\"init\"", "\"file\"", "\"dir\"", "\"prefix\"", "index.json", "`seed`", "\"rand\"", "\"randn\"",
                          "`need_weights`", "`training`", "`average_attn_weights`", "`is_causal`", "`threads`",
                          "`device`", "`dtype`", "`math_fidelity`", "`fp32_dest_acc_en`", "`math_approx_mode`",
                          "`memory_config`", "`core_grid`", "`numerics`", "`warmup`", "`iterations`", "`atol`",
                          "`rtol`", "`pcc`", "`embed_dim`", "`kdim`", "`batch_first`", "`d_in`", "`d_model`",
                          "`hidden_size`", "`qkv_bias`", "`add_bias_kv`", "`add_zero_attn`", "`key_padding_mask`"})
    EXPECT_NE(doc.find(key), std::string::npos) << key;
}

// Every [text](target) in README.md and docs/*.md that points into the
// repository names a file that exists, and a #anchor names a heading of it.
TEST(Docs, EveryLinkResolves) {
  int checked = 0;
  for (const std::string& page : doc_pages()) {
    const std::string md = read_text(source_dir() + "/" + page);
    const std::string text = outside_fences(md);
    const fs::path dir = fs::path(source_dir() + "/" + page).parent_path();
    for (size_t at = text.find("]("); at != std::string::npos; at = text.find("](", at + 2)) {
      const size_t close = text.find(')', at + 2);
      if (close == std::string::npos) break;
      const std::string target = text.substr(at + 2, close - at - 2);
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
      const size_t hash = target.find('#');
      const std::string file = target.substr(0, hash);
      const fs::path path = file.empty() ? fs::path(source_dir() + "/" + page) : dir / file;
      ++checked;
      if (!fs::exists(path)) {
        ADD_FAILURE() << page << ": link to a missing file: " << target;
        continue;
      }
      if (hash == std::string::npos) continue;
      const std::string anchor = target.substr(hash + 1);
      EXPECT_TRUE(anchors(read_text(path.string())).count(anchor)) << page << ": no heading for the anchor in " << target;
    }
  }
  EXPECT_GT(checked, 40);  // the parse found the links
}

// Every file or folder of this repository a page names in a code span exists.
TEST(Docs, EveryRepositoryPathCitedExists) {
  int checked = 0;
  for (const std::string& page : doc_pages())
    for (const std::string& span : code_spans(read_text(source_dir() + "/" + page))) {
      const std::string p = cited_path(span);
      if (p.empty()) continue;
      ++checked;
      EXPECT_TRUE(fs::exists(source_dir() + "/" + p)) << page << " cites " << p << ", which does not exist";
    }
  EXPECT_GT(checked, 100);  // the parse found the paths
}

// README is the front door: short, the quick start's two commands as they
// are, each task with its page, and the four extension recipes.
TEST(Docs, ReadmeIsTheFrontDoor) {
  const std::string readme = read_text(source_dir() + "/README.md");
  EXPECT_LE(std::count(readme.begin(), readme.end(), '\n'), 300);
  EXPECT_NE(readme.find("./scripts/setup.sh && ./build/mha run --config configs/seed000_book_mha.json\n./scripts/test.sh\n"),
            std::string::npos);
  for (const char* page : {"(docs/RUN.md)", "(docs/BENCH.md)", "(docs/COMPARE.md)", "(docs/TTSIM.md", "(docs/MPI.md)"})
    EXPECT_NE(readme.find(page), std::string::npos) << page;
  for (const char* heading : {"## Quick start", "## Architecture", "## Extending mha", "### A variant", "### A backend",
                              "### A TT op", "### A kernel revision"})
    EXPECT_NE(readme.find(heading), std::string::npos) << heading;
}

// Each "`name` (`path`)" in README's "Extending mha" names something the
// cited file defines or declares.
TEST(Docs, ExtendingRecipesCiteNamesThatExist) {
  const std::string readme = read_text(source_dir() + "/README.md");
  const size_t begin = readme.find("## Extending mha");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = readme.find("\n## ", begin + 3);
  // One space for every run of whitespace, so a citation may wrap.
  std::string section;
  for (char c : readme.substr(begin, end == std::string::npos ? std::string::npos : end - begin)) {
    const bool space = c == ' ' || c == '\n';
    if (!space) section += c;
    else if (section.empty() || section.back() != ' ') section += ' ';
  }
  int checked = 0;
  for (size_t at = section.find("` (`"); at != std::string::npos; at = section.find("` (`", at + 4)) {
    const size_t name_start = section.rfind('`', at - 1);
    const size_t path_end = section.find("`)", at + 4);
    ASSERT_NE(name_start, std::string::npos);
    ASSERT_NE(path_end, std::string::npos);
    std::string name = section.substr(name_start + 1, at - name_start - 1);
    const std::string path = section.substr(at + 4, path_end - at - 4);
    if (name.size() > 2 && name.compare(name.size() - 2, 2, "()") == 0) name.resize(name.size() - 2);
    name = name.substr(name.rfind(':') == std::string::npos ? 0 : name.rfind(':') + 1);
    ++checked;
    ASSERT_TRUE(fs::is_regular_file(source_dir() + "/" + path)) << path;
    EXPECT_TRUE(has_word(read_text(source_dir() + "/" + path), name)) << path << " has no " << name;
  }
  EXPECT_GE(checked, 12);  // every recipe cites what it touches
}

TEST(Docs, BenchmarksMdHoldsCurrentFiguresOnly) {
  const std::string doc = read_text(source_dir() + "/docs/BENCHMARKS.md");
  EXPECT_LE(std::count(doc.begin(), doc.end(), '\n'), 500);
}

TEST(Docs, SlowLabelThatTestShExcludesExists) {
  const std::string script = read_text(source_dir() + "/scripts/test.sh");
  ASSERT_NE(script.find("-LE 'slow|numeric'"), std::string::npos);
  const std::string build = fs::path(MHA_BINARY).parent_path().string();
  // Tests are listed once their binary is built (gtest_discover_tests).
  if (!fs::exists(build + "/tests/test_parity")) GTEST_SKIP() << "test_parity not built in " << build;
  CommandResult r = run_command("cd " + shell_quote(build) + " && ctest -N -L slow");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Total Tests: 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Parity"), std::string::npos) << r.out;
}

// The sanitizer pass leaves the `numeric` sweeps to the Release pass, which
// runs them (tests/CMakeLists.txt): the label names tt-sim cases, and only those.
TEST(Docs, NumericLabelThatTestShExcludesExists) {
  const std::string build = fs::path(MHA_BINARY).parent_path().string();
  if (!fs::exists(build + "/tests/test_ttsim")) GTEST_SKIP() << "test_ttsim not built in " << build;
  CommandResult r = run_command("cd " + shell_quote(build) + " && ctest -N -L numeric");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Total Tests: 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SdpaStandard.FastEqualsOracleAcrossProgramConfigs"), std::string::npos) << r.out;
  r = run_command("cd " + shell_quote(build) + " && ctest -N -LE numeric -R SdpaStandard");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SdpaStandard.FastEqualsOracleOnEdgeValues"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mha::test
