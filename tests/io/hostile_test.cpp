// Regression tests for issue 10's "parsers under attack" findings on tensor
// files: each case rebuilds the triggering file from its description.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "io/io_util.h"
#include "io/npy.h"
#include "io/tensor_file.h"
#include "io/zip.h"
#include "io_test_util.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/read_file.h"

using namespace mha;
using namespace mha::test;
using io::detail::put16;
using io::detail::put32;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The least CPU time (this thread's) of three calls of f.
template <class F>
double best_cpu_seconds(F&& f) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    timespec a{}, b{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    f();
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    best = std::min(best, (b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec));
  }
  return best;
}

}  // namespace

// A 1.9 MB Fortran-order .npy with shape (10^6, then 300,000 ones) kept a core
// busy for ~9 minutes (elements x dimensions). numpy never writes more than
// 64 dimensions, so the header is refused before any data is touched.
TEST(HostileNpy, ShapeWithThousandsOfUnitDimsIsRefusedQuickly) {
  std::string shape = "(1000000, ";
  for (int i = 0; i < 300000; ++i) shape += "1, ";
  shape += ")";
  const std::string file =
      npy("{'descr': '|u1', 'fortran_order': True, 'shape': " + shape + ", }\n", std::string(1000000, '\1'), 2);
  std::string msg = error_of([&] { io::detail::decode_npy(file, "big.npy"); });
  EXPECT_NE(msg.find("more than 64 items: a shape has at most numpy's 64 dimensions"), std::string::npos) << msg;
}

// 64 dimensions are accepted, and unit dimensions cost nothing in the
// Fortran-to-C reorder: the values land exactly where numpy puts them.
TEST(HostileNpy, FortranOrderWithUnitDimsDecodesLikeNumpy) {
  // Shape (1, 2, 1 x 59, 3, 1, 1): Fortran data is element (i, j) at j*2 + i.
  std::string shape = "(1, 2, ";
  for (int i = 0; i < 59; ++i) shape += "1, ";
  shape += "3, 1, 1)";
  std::string data;
  for (int v : {0, 10, 1, 11, 2, 12}) data += static_cast<char>(v);  // Fortran order of [[0,1,2],[10,11,12]]
  Tensor t = io::detail::decode_npy(npy("{'descr': '|u1', 'fortran_order': True, 'shape': " + shape + ", }\n", data),
                                    "f.npy");
  ASSERT_EQ(t.ndim(), 64);
  const uint8_t want[] = {0, 1, 2, 10, 11, 12};
  EXPECT_EQ(std::memcmp(t.raw(), want, 6), 0);

  // A large many-dimensional Fortran array decodes to the same bytes as its
  // two-dimensional twin, at about the same cost: the reorder once cost
  // elements x dimensions (32x the twin's work here), so a ratio of 4 on
  // the best of three CPU times (measured in this test, on this machine)
  // tells the two apart with room for noise.
  std::string big = "(2000, ";
  for (int i = 0; i < 62; ++i) big += "1, ";
  big += "2000)";
  std::string bytes(4000000, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i % 251);
  const std::string many = npy("{'descr': '|u1', 'fortran_order': True, 'shape': " + big + ", }\n", bytes);
  const std::string two = npy("{'descr': '|u1', 'fortran_order': True, 'shape': (2000, 2000), }\n", bytes);
  Tensor b, b2;
  const double many_s = best_cpu_seconds([&] { b = io::detail::decode_npy(many, "b.npy"); });
  const double two_s = best_cpu_seconds([&] { b2 = io::detail::decode_npy(two, "b2.npy"); });
  // C element (i, j) is Fortran element j*2000 + i.
  EXPECT_EQ(b.raw()[7 * 2000 + 5], static_cast<uint8_t>((5 * 2000 + 7) % 251));
  ASSERT_EQ(b.nbytes(), b2.nbytes());
  EXPECT_EQ(std::memcmp(b.raw(), b2.raw(), b.nbytes()), 0);
  EXPECT_LE(many_s, 4 * two_s) << "64 dimensions: " << many_s << " s of CPU, 2 dimensions: " << two_s;
}

// A header repeating 'shape' was read as the two shapes concatenated.
TEST(HostileNpy, RepeatedHeaderKeysAreRefused) {
  for (const char* key : {"shape", "descr", "fortran_order"}) {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ";
    if (std::string(key) == "shape") dict += "'shape': (3,), }";
    else if (std::string(key) == "descr") dict += "'descr': '<f8', }";
    else dict += "'fortran_order': True, }";
    std::string msg = error_of([&] { io::detail::decode_npy(npy(dict, std::string(24, '\0')), "d.npy"); });
    EXPECT_NE(msg.find("key '" + std::string(key) + "' appears twice"), std::string::npos) << msg;
  }
}

// A deflated member was inflated whole (up to ~1000x the file) before its
// .npy header was looked at. Now a bounded prefix is inflated and the header's
// size held to the member's stated size first.
TEST(HostileNpz, DeflatedMemberHeaderIsCheckedBeforeInflating) {
  TempDir dir;
  // Header says (2, 3) float32 (24 bytes) but 100 MB of zeros follow: deflate
  // packs them into ~100 KB.
  const std::string member = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
                                 std::string(100'000'000, '\0'));
  const std::string z = io::detail::write_zip({{"x.npy", member}}, true);
  ASSERT_LT(z.size(), 200'000u);
  write_bytes(dir.file("bomb.npz"), z);
  std::string msg = error_of([&] { io::read_npz(dir.file("bomb.npz")); });
  EXPECT_NE(msg.find("tensor 'x': member states " + std::to_string(member.size()) +
                     " bytes uncompressed, but its .npy header (shape (2, 3) of float32) needs 94"),
            std::string::npos)
      << msg;
}

TEST(HostileNpz, PrefixInflatesOnlyWhatIsAsked) {
  const std::string member = std::string(1'000'000, 'a');
  const std::string z = io::detail::write_zip({{"x.npy", member}}, true);
  io::detail::ZipReader r(z, "z.npz");
  ASSERT_EQ(r.entries().size(), 1u);
  EXPECT_EQ(r.extract_prefix(r.entries()[0], 100), std::string(100, 'a'));
  EXPECT_EQ(r.extract_prefix(r.entries()[0], 5'000'000), member);
}

// /dev/zero given as an input was read until memory ran out.
TEST(HostileFiles, DevicesAreRefused) {
  std::string msg = error_of([] { io::read_npy("/dev/zero"); });
  EXPECT_NE(msg.find("/dev/zero: is a character device, expected a regular file"), std::string::npos) << msg;
  auto r = run_mha("inspect /dev/zero");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is a character device"), std::string::npos) << r.err;
  r = run_mha("compare /dev/urandom /dev/zero");
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

// A FIFO is refused like a device: opening one blocks until a writer comes,
// and a writer can feed it forever (issue 22). Refused without opening it,
// so no writer is needed for the call to return.
TEST(HostileFiles, FifosAreRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("p");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO blocks until a writer comes: a regression hangs here
  // (and ctest's timeout reports it) rather than failing a clock.
  std::string msg = error_of([&] { read_input_file(fifo); });
  EXPECT_NE(msg.find("p: is a pipe (FIFO), expected a regular file"), std::string::npos) << msg;
  msg = error_of([&] { io::SafetensorsReader r(fifo); });
  EXPECT_NE(msg.find("is a pipe (FIFO)"), std::string::npos) << msg;
  msg = error_of([&] { io::NpyRows r(fifo); });
  EXPECT_NE(msg.find("is a pipe (FIFO)"), std::string::npos) << msg;
}
