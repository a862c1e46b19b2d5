// Every prefix and thousands of random byte mutations of valid files: the
// readers must either succeed or throw InputError, never anything else
// (bad_alloc would mean a size was trusted before it was checked). Under
// AddressSanitizer this also proves no out-of-bounds read.
#include <random>

#include "io/tensor_file.h"
#include "io/zip.h"
#include "io_test_util.h"

namespace mha::test {
namespace {

struct Seed {
  std::string file;
  std::string bytes;
};

std::vector<Seed> seeds(const TempDir& dir) {
  NamedTensors ts = {{"a", pattern_tensor(DType::F32, {2, 3}, 1)},
                     {"b", pattern_tensor(DType::I16, {5}, 2)},
                     {"c", pattern_tensor(DType::Bool, {0, 3}, 3)}};
  io::write_npy(dir.file("s.npy"), ts[0].second);
  io::write_npz(dir.file("s.npz"), ts);
  io::write_safetensors(dir.file("s.safetensors"), ts);
  std::vector<Seed> out = {{"m.npy", read_text(dir.file("s.npy"))},
                           {"m.npz", read_text(dir.file("s.npz"))},
                           {"m.safetensors", read_text(dir.file("s.safetensors"))}};
  std::vector<io::detail::ZipMember> members;
  for (const auto& [name, t] : ts) {
    io::write_npy(dir.file("t.npy"), t);
    members.push_back({name + ".npy", read_text(dir.file("t.npy"))});
  }
  out.push_back({"d.npz", io::detail::write_zip(members, true)});
  // A big-endian Fortran-order header, as numpy writes for such arrays.
  std::string dict = "{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }";
  std::string f = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict + std::string(48, '\x3f');
  out.push_back({"f.npy", f});
  return out;
}

::testing::AssertionResult reads_or_input_error(const std::string& path, int* rejected = nullptr) {
  try {
    io::read_all(path);
  } catch (const InputError& e) {
    if (rejected) ++*rejected;
    std::string msg = e.what();
    if (msg.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "multi-line error: " << msg;
    if (msg.rfind(path, 0) != 0) return ::testing::AssertionFailure() << "error does not name the file: " << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "unexpected exception: " << e.what();
  }
  return ::testing::AssertionSuccess();
}


TEST(Mutation, PrefixesAndRandomMutations) {
  TempDir dir;
  std::mt19937 rng(1234);
  int rejected = 0, total = 0;
  for (const Seed& s : seeds(dir)) {
    const std::string path = dir.file(s.file);
    write_text(path, s.bytes);
    ASSERT_NO_THROW(io::read_all(path)) << s.file;
    for (std::size_t len = 0; len < s.bytes.size(); ++len) {
      write_text(path, s.bytes.substr(0, len));
      ASSERT_TRUE(reads_or_input_error(path)) << s.file << " cut to " << len << " bytes";
      ++total;
    }
    for (int i = 0; i < 1500; ++i) {
      std::string m = s.bytes;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        std::size_t at = rng() % m.size();
        switch (rng() % 3) {
          case 0: m[at] = static_cast<char>(rng()); break;
          case 1: m[at] = static_cast<char>(m[at] ^ (1 << (rng() % 8))); break;
          case 2: m[at] = "\xff\x00\x7f\x80{}()[],:'\"9"[rng() % 14]; break;
        }
      }
      write_text(path, m);
      ASSERT_TRUE(reads_or_input_error(path, &rejected)) << s.file << " mutation " << i;
      ++total;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(total, 7500);
}

}  // namespace
}  // namespace mha::test
