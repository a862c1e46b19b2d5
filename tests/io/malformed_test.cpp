// Hostile and broken files: every one must make `mha inspect` exit with code
// exactly 2 and one stderr line naming the file and the problem, and never
// crash (the suite also runs under AddressSanitizer + UBSan).
#include <filesystem>

#include "io/io_util.h"
#include "io/tensor_file.h"
#include "io/zip.h"
#include "io_test_util.h"

namespace mha::test {
namespace {

using io::detail::le32;
using io::detail::put16;
using io::detail::put32;
using io::detail::put64;

struct Case {
  std::string name;    // test name
  std::string file;    // file (or folder) name to create
  std::string bytes;   // its contents (for a folder: contents of bad.npy inside, if any)
  std::string expect;  // substring of the error message
  bool folder = false;
};

// Keeps test listings (and ctest's names) readable: the case's name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string npy_f4(const std::string& shape, const std::string& data) {
  return npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n", data);
}
std::string zeros(std::size_t n) { return std::string(n, '\0'); }
std::string good_npy() { return npy_f4("(2, 3)", zeros(24)); }

// Single-member archives and where their fields are.
std::string zip1(const std::string& data, bool deflate, const std::string& name = "x.npy") {
  return io::detail::write_zip({{name, data}}, deflate);
}
std::size_t cd_of(const std::string& z) { return le32(io::detail::bytes_of(z) + z.size() - 22 + 16); }
void set32(std::string& s, std::size_t at, uint32_t v) { std::memcpy(&s[at], &v, 4); }
void set16(std::string& s, std::size_t at, uint16_t v) { std::memcpy(&s[at], &v, 2); }
uint32_t get32(const std::string& s, std::size_t at) { return le32(io::detail::bytes_of(s) + at); }

std::string st(const std::string& header, const std::string& data) {
  std::string s;
  put64(s, header.size());
  return s + header + data;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  // .npy
  c.push_back({"NpyEmptyFile", "a.npy", "", "not a .npy file"});
  c.push_back({"NpyBadMagic", "a.npy", "\x93NUMPZ\x01\x00\x10\x00" + std::string(16, ' '), "not a .npy file"});
  c.push_back({"NpyTruncatedPreamble", "a.npy", "\x93NUMPY\x01", "truncated .npy preamble"});
  std::string v4 = good_npy();
  v4[6] = 4;
  c.push_back({"NpyVersion4", "a.npy", v4, "format version 4.0"});
  std::string v11 = good_npy();
  v11[7] = 1;
  c.push_back({"NpyVersion1_1", "a.npy", v11, "format version 1.1"});
  std::string past = good_npy();
  set16(past, 8, 0xffff);
  c.push_back({"NpyHeaderLengthPastEnd", "a.npy", past, "runs past the end of the file"});
  std::string huge = npy("{}", "", 2);
  set32(huge, 8, 0xfffffff0u);
  c.push_back({"NpyHeaderLengthHuge", "a.npy", huge, "exceeds the limit"});
  c.push_back({"NpyDictUnclosed", "a.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "), "bad .npy header"});
  c.push_back({"NpyNotADict", "a.npy", npy("[1, 2]"), "expected '{'"});
  c.push_back({"NpyComplexDtype", "a.npy", npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", zeros(8)), "unsupported dtype '<c8'"});
  c.push_back({"NpyObjectDtype", "a.npy", npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", zeros(8)), "unsupported dtype '|O'"});
  c.push_back({"NpyStructuredDtype", "a.npy", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", zeros(4)), "structured dtypes"});
  c.push_back({"NpyMissingShape", "a.npy", npy("{'descr': '<f4', 'fortran_order': False}"), "key 'shape' is missing"});
  c.push_back({"NpyExtraKey", "a.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", zeros(4)), "unexpected key 'x'"});
  c.push_back({"NpyShapeIsList", "a.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", zeros(4)), "'shape' is not a tuple"});
  c.push_back({"NpyNegativeDim", "a.npy", npy_f4("(-1, 3)", ""), "negative dimension"});
  c.push_back({"NpyShapeProductOverflows", "a.npy", npy_f4("(4294967296, 4294967296, 16)", zeros(4)), "more elements than fit in 64 bits"});
  c.push_back({"NpyByteCountOverflows", "a.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,)}", zeros(8)), "more bytes than fit in 64 bits"});
  c.push_back({"NpyDimLiteralTooBig", "a.npy", npy_f4("(99999999999999999999,)", ""), "does not fit in 64 bits"});
  c.push_back({"NpyTruncatedData", "a.npy", npy_f4("(10,)", zeros(8)), "data is truncated"});
  c.push_back({"NpyHugeShapeTinyFile", "a.npy", npy_f4("(1000000000000,)", zeros(4)), "needs 4000000000000 bytes, found 4"});
  c.push_back({"NpyTrailingData", "a.npy", npy_f4("(1,)", zeros(8)), "unexpected bytes after the data"});
  c.push_back({"NpyFortranOrderNotBool", "a.npy", npy("{'descr': '<f4', 'fortran_order': 1, 'shape': ()}", zeros(4)), "'fortran_order' is not True or False"});
  c.push_back({"NpyUnterminatedString", "a.npy", npy("{'descr: '<f4'}"), "bad .npy header"});
  c.push_back({"NpyDeepNesting", "a.npy", npy("{'shape': " + std::string(200, '(') + std::string(200, ')') + "}"), "nested too deeply"});
  c.push_back({"NpyControlBytesEscaped", "a.npy", npy("{'descr': '\n\x01', 'fortran_order': False, 'shape': ()}"), "unsupported dtype '\\x0a\\x01'"});

  // .npz
  const std::string stored = zip1(good_npy(), false), deflated = zip1(good_npy(), true);
  const std::size_t scd = cd_of(stored), dcd = cd_of(deflated);
  c.push_back({"NpzNotAZip", "a.npz", std::string(100, 'x'), "not a zip archive"});
  c.push_back({"NpzTinyFile", "a.npz", "PK", "not a zip archive"});
  c.push_back({"NpzTruncatedCentralDirectory", "a.npz", stored.substr(0, scd + 20), "no end of central directory"});
  std::string z = stored;
  set32(z, z.size() - 22 + 12, get32(z, z.size() - 22 + 12) + 100);
  c.push_back({"NpzCentralDirectoryPastEnd", "a.npz", z, "runs past its end record"});
  z = stored;
  set16(z, z.size() - 22 + 8, 1000);
  set16(z, z.size() - 22 + 10, 1000);
  c.push_back({"NpzEntryCountLies", "a.npz", z, "claims 1000 entries"});
  z = stored;
  z[scd - 1] ^= 0x40;
  c.push_back({"NpzBadCrc", "a.npz", z, "CRC-32 mismatch"});
  z = stored;
  set32(z, scd + 24, get32(z, scd + 24) + 10);
  c.push_back({"NpzStoredMemberLiesAboutSize", "a.npz", z, "stored member has compressed size"});
  z = stored;
  set32(z, scd + 20, 0x7fffffff);
  set32(z, scd + 24, 0x7fffffff);
  c.push_back({"NpzMemberRunsPastMemberArea", "a.npz", z, "run past the member area"});
  z = deflated;
  set32(z, dcd + 24, get32(z, dcd + 24) + 100);
  c.push_back({"NpzDeflatedClaimsMore", "a.npz", z, "member states 194 bytes uncompressed, but its .npy header"});
  z = deflated;
  set32(z, dcd + 24, get32(z, dcd + 24) - 10);
  c.push_back({"NpzDeflatedClaimsLess", "a.npz", z, "member states 84 bytes uncompressed, but its .npy header"});
  z = deflated;
  set32(z, dcd + 24, 0xfffffff0u);
  c.push_back({"NpzDeflateBombRatio", "a.npz", z, "more than deflate can produce"});
  z = deflated;
  for (std::size_t i = 30 + 5; i < 30 + 5 + 8; ++i) z[i] = '\xff';
  c.push_back({"NpzCorruptDeflateData", "a.npz", z, "corrupt deflate data"});
  z = stored;
  set32(z, scd + 42, 0x7fffffff);
  c.push_back({"NpzLocalOffsetOutOfBounds", "a.npz", z, "local header offset"});
  z = stored;
  z[0] = 'Q';
  c.push_back({"NpzBadLocalSignature", "a.npz", z, "local header has a bad signature"});
  z = stored;
  z[scd] = 'Q';
  c.push_back({"NpzBadCentralSignature", "a.npz", z, "bad signature"});
  z = stored;
  set16(z, scd + 10, 12);
  c.push_back({"NpzUnsupportedMethod", "a.npz", z, "unsupported compression method 12"});
  z = stored;
  set16(z, scd + 8, 1);
  c.push_back({"NpzEncrypted", "a.npz", z, "encrypted"});
  c.push_back({"NpzDuplicateMembers", "a.npz", io::detail::write_zip({{"x.npy", good_npy()}, {"x.npy", good_npy()}}, false), "appears twice"});
  c.push_back({"NpzMembersOverlap", "a.npz", [&] {
    std::string two = io::detail::write_zip({{"x.npy", good_npy()}, {"y.npy", good_npy()}}, false);
    std::size_t cd = cd_of(two);
    // The first member claims every byte up to the central directory, which
    // includes the second member: the overlapping-members zip bomb shape.
    set32(two, cd + 20, static_cast<uint32_t>(cd - 35));
    set32(two, cd + 24, static_cast<uint32_t>(cd - 35));
    return two;
  }(), "overlaps"});
  c.push_back({"NpzMemberIsNotNpy", "a.npz", zip1("hello world", false), "tensor 'x': not a .npy file"});
  c.push_back({"NpzMemberNpyTruncated", "a.npz", zip1(good_npy().substr(0, 80), false), "tensor 'x': data is truncated"});
  c.push_back({"NpzDeflatedMemberNpyTruncated", "a.npz", zip1(good_npy().substr(0, 80), true),
               "tensor 'x': member states 80 bytes uncompressed, but its .npy header (shape (2, 3) of float32) needs 94"});
  z = stored;
  set32(z, scd + 20, 0xffffffffu);
  c.push_back({"NpzSaturatedSizeWithoutZip64Extra", "a.npz", z, "run past the member area"});
  z = stored;
  set32(z, z.size() - 22 + 16, 0xffffffffu);
  c.push_back({"NpzZip64EndRecordMissing", "a.npz", z, "needs a zip64 end record"});

  // .safetensors
  const std::string f4x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  c.push_back({"StShorterThanLength", "a.safetensors", "abcd", "expected at least 8"});
  c.push_back({"StHeaderLengthHuge", "a.safetensors", [] { std::string s; put64(s, 1ull << 40); return s + "{}"; }(), "exceeds the limit of 100000000"});
  c.push_back({"StHeaderLengthPastEnd", "a.safetensors", [] { std::string s; put64(s, 1000); return s + "{}      "; }(), "runs past the end of the file"});
  c.push_back({"StHeaderNotObject", "a.safetensors", st("[1, 2]", ""), "does not start with '{'"});
  c.push_back({"StInvalidJson", "a.safetensors", st("{\"a\": ", ""), "not valid JSON"});
  c.push_back({"StInvalidUtf8", "a.safetensors", st("{\"\xff\xfe\": {}}", ""), "not valid JSON"});
  c.push_back({"StDeepJson", "a.safetensors", st("{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + "}", ""), "nests deeper"});
  c.push_back({"StUnknownDtype", "a.safetensors", st(R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", zeros(8)), "unsupported dtype \"C64\""});
  c.push_back({"StEntryNotObject", "a.safetensors", st(R"({"a":3})", ""), "tensor 'a': header entry is not a JSON object"});
  c.push_back({"StOffsetsOverlap", "a.safetensors", st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", zeros(12)), "overlap the previous tensor"});
  c.push_back({"StOffsetsLeaveGap", "a.safetensors", st(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", zeros(12)), "leave a gap"});
  c.push_back({"StOffsetsPastEnd", "a.safetensors", st(f4x2, zeros(4)), "run past the end of the data buffer"});
  c.push_back({"StBufferNotCovered", "a.safetensors", st(f4x2, zeros(12)), "cover 8 bytes of the data buffer, expected all 12"});
  c.push_back({"StSizeMismatch", "a.safetensors", st(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", zeros(20)), "hold 20 bytes, expected 24"});
  c.push_back({"StShapeOverflows", "a.safetensors", st(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", zeros(4)), "more elements than fit in 64 bits"});
  c.push_back({"StByteCountOverflows", "a.safetensors", st(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})", zeros(8)), "more bytes than fit in 64 bits"});
  c.push_back({"StNegativeDim", "a.safetensors", st(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""), "expected a non-negative integer"});
  c.push_back({"StOffsetsWrongArity", "a.safetensors", st(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", zeros(4)), "data_offsets"});
  c.push_back({"StEndBeforeBegin", "a.safetensors", st(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", zeros(8)), "end before they begin"});
  c.push_back({"StMetadataNotStrings", "a.safetensors", st(R"({"__metadata__":{"k":1}})", ""), "__metadata__"});
  c.push_back({"StMissingDtype", "a.safetensors", st(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", zeros(4)), "no string \"dtype\""});

  // Folders and unknown files
  c.push_back({"FolderWithoutNpy", "dir", "", "holds no .npy files", true});
  c.push_back({"FolderWithBadNpy", "dir", npy_f4("(3,)", zeros(4)), "bad.npy: data is truncated", true});
  c.push_back({"UnknownFileType", "a.bin", "just text", "unknown tensor file type"});
  c.push_back({"MissingFile", "", "", "cannot open"});
  return c;
}

class Malformed : public ::testing::TestWithParam<Case> {};

TEST_P(Malformed, InspectExitsTwoWithOneLineNamingTheFile) {
  const Case& c = GetParam();
  TempDir dir;
  std::string path = dir.file(c.file.empty() ? "missing.npy" : c.file);
  if (c.folder) {
    std::filesystem::create_directory(path);
    write_text(path + "/ignored.txt", "not a tensor");
    if (!c.bytes.empty()) write_text(path + "/bad.npy", c.bytes);
  } else if (!c.file.empty()) {
    write_text(path, c.bytes);
  }
  CommandResult r = run_mha("inspect " + shell_quote(path));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "stderr is not one line: " << r.err;
  EXPECT_EQ(r.err.rfind("mha: error: " + path, 0), 0u) << r.err;
  EXPECT_NE(r.err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << r.err;
  // The library reports the same as an InputError.
  EXPECT_THROW(io::read_all(path), InputError);
  // The piecemeal reader (checkpoints) validates the header and layout as read_all does.
  if (c.file == "a.safetensors") {
    EXPECT_EQ(error_of([&] { io::SafetensorsReader st(path); }), error_of([&] { io::read_all(path); }));
  }
}

INSTANTIATE_TEST_SUITE_P(Files, Malformed, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(MalformedTable, HasAtLeastThirtyCases) { EXPECT_GE(cases().size(), 30u); }

}  // namespace
}  // namespace mha::test
