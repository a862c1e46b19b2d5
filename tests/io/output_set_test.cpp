// OutputSet, the one place every command's outputs go through: checked
// before any work, refused when they would overwrite an input or each other,
// written all or nothing.
#include "io/output_set.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "io_test_util.h"
#include "support/test_support.h"
#include "util/error.h"

namespace mha::test {
namespace {

namespace fs = std::filesystem;

int entries(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += !e.path().empty();
  return n;
}

TEST(OutputSet, RefusesAnInputBySameInodeNotJustSameString) {
  TempDir dir;
  write_text(dir.file("in.npy"), "input");
  fs::create_hard_link(dir.file("in.npy"), dir.file("hard.npy"));
  fs::create_symlink(dir.file("in.npy"), dir.file("soft.npy"));
  fs::create_directory(dir.file("sub"));
  for (const std::string& out : {dir.file("in.npy"), dir.file("hard.npy"), dir.file("soft.npy"),
                                 dir.file("sub/../in.npy"), dir.path() + "/./in.npy"}) {
    io::OutputSet outs;
    outs.add_input(dir.file("in.npy"));
    std::string err = error_of([&] { outs.add_file("--json", out); });
    EXPECT_NE(err.find("is the same file as the input"), std::string::npos) << out << ": " << err;
  }
  EXPECT_EQ(read_text(dir.file("in.npy")), "input");
}

TEST(OutputSet, FilesInsideAnInputFolderAreInputs) {
  TempDir dir;
  fs::create_directory(dir.file("w"));
  write_text(dir.file("w/q.npy"), "weights");
  io::OutputSet outs;
  outs.add_input(dir.file("w"));
  EXPECT_NE(error_of([&] { outs.add_file("-o", dir.file("w/q.npy")); }).find("same file as the input"),
            std::string::npos);
  EXPECT_NE(error_of([&] { outs.add_folder("--dump-stages", dir.file("w")); }).find("same file as the input"),
            std::string::npos);
}

TEST(OutputSet, RefusesTwoOutputsOnOneFileEvenBeforeItExists) {
  TempDir dir;
  io::OutputSet outs;
  outs.add_file("--output", dir.file("o.npy"));
  std::string err = error_of([&] { outs.add_file("--json", dir.path() + "/./o.npy"); });
  EXPECT_NE(err.find("is the same file as --output"), std::string::npos) << err;
}

TEST(OutputSet, FoldersAreCheckedBeforeAnyWork) {
  TempDir dir;
  write_text(dir.file("file"), "x");
  io::OutputSet outs;
  EXPECT_NE(error_of([&] { outs.add_file("--json", dir.file("nodir/r.json")); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([&] { outs.add_file("--json", dir.file("file/r.json")); }).find("is not a folder"),
            std::string::npos);
  EXPECT_NE(error_of([&] { outs.add_file("--json", dir.path()); }).find("is a folder"), std::string::npos);
  EXPECT_NE(error_of([&] { outs.add_folder("--dump-stages", dir.file("file")); }).find("is not a folder"),
            std::string::npos);
  // Not writable: /proc takes no new files, even for root.
  EXPECT_NE(error_of([&] { outs.add_folder("--dump-stages", "/proc/mha-stages"); }).find("cannot write in folder"),
            std::string::npos);
  EXPECT_NE(error_of([&] { outs.add_file("--output", "/proc/mha-out.npy"); }).find("cannot write in folder"),
            std::string::npos);
}

TEST(OutputSet, ReadOnlyFolderIsRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders; /proc covers this case above";
  TempDir dir;
  fs::create_directory(dir.file("ro"));
  ::chmod(dir.file("ro").c_str(), 0555);
  io::OutputSet outs;
  EXPECT_NE(error_of([&] { outs.add_file("-o", dir.file("ro/x.npy")); }).find("cannot write in folder"),
            std::string::npos);
  EXPECT_NE(error_of([&] { outs.add_folder("--dump-stages", dir.file("ro")); }).find("cannot write in folder"),
            std::string::npos);
  ::chmod(dir.file("ro").c_str(), 0755);
}

TEST(OutputSet, NothingReachesItsTargetWithoutCommit) {
  TempDir dir;
  write_text(dir.file("old.npy"), "old");
  {
    io::OutputSet outs;
    outs.add_file("-o", dir.file("old.npy"));
    outs.add_file("--json", dir.file("new.json"));
    outs.add_folder("--dump-stages", dir.file("stages"));
    outs.stage_bytes(dir.file("old.npy"), "new");
    outs.stage_bytes(dir.file("new.json"), "{}");
    outs.stage_in_folder(dir.file("stages"), "q.npy", [](const std::string& p) { write_text(p, "q"); });
    // ... and then the command fails: no commit.
  }
  EXPECT_EQ(read_text(dir.file("old.npy")), "old");
  EXPECT_FALSE(fs::exists(dir.file("new.json")));
  EXPECT_FALSE(fs::exists(dir.file("stages")));
  EXPECT_EQ(entries(dir.path()), 1) << "temporaries left behind";
}

TEST(OutputSet, CommitPutsEveryOutputInPlace) {
  TempDir dir;
  write_text(dir.file("old.npy"), "old");
  fs::create_directory(dir.file("existing"));
  {
    io::OutputSet outs;
    outs.add_file("-o", dir.file("old.npy"));
    outs.add_file("--attn-weights", dir.file("never.npy"));  // declared, never staged
    outs.add_folder("--dump-stages", dir.file("stages"));
    outs.add_folder("--other", dir.file("existing"));
    outs.stage_bytes(dir.file("old.npy"), "new");
    outs.stage_in_folder(dir.file("stages"), "q.npy", [](const std::string& p) { write_text(p, "q"); });
    outs.stage_in_folder(dir.file("existing"), "k.npy", [](const std::string& p) { write_text(p, "k"); });
    outs.commit();
  }
  EXPECT_EQ(read_text(dir.file("old.npy")), "new");
  EXPECT_EQ(read_text(dir.file("stages/q.npy")), "q");
  EXPECT_EQ(read_text(dir.file("existing/k.npy")), "k");
  EXPECT_FALSE(fs::exists(dir.file("never.npy")));
  EXPECT_EQ(entries(dir.path()), 3);
  EXPECT_EQ(entries(dir.file("existing")), 1);
  // Committed files get the mode a plain open() gives, not mkstemp's 0600.
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("old.npy").c_str(), &st), 0);
  mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST(OutputSet, AStreamIsWrittenInPlaceAsItGoes) {
  TempDir dir;
  io::OutputSet outs;
  outs.add_file("--output", dir.file("rows.jsonl"));
  std::FILE* f = outs.open_stream(dir.file("rows.jsonl"));
  std::fputs("{\"row\": 1}\n", f);
  std::fflush(f);
  EXPECT_EQ(read_text(dir.file("rows.jsonl")), "{\"row\": 1}\n");
}

}  // namespace
}  // namespace mha::test
