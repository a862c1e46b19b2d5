// .npz against numpy: savez (stored) and savez_compressed (deflate, zip64
// extra fields from force_zip64) read by mha; mha's archives read by numpy.
#include <sstream>

#include "io/tensor_file.h"
#include "io/zip.h"
#include "io_test_util.h"

namespace mha::test {
namespace {

const char* kNumpyWritesNpz = R"(
import numpy as np
rng = np.random.default_rng(3)
arrays = {}
for dt in ['bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64',
           'float16', 'float32', 'float64']:
    if dt == 'bool':
        a = rng.integers(0, 2, 60).astype(bool)
    elif dt.startswith('float'):
        a = rng.standard_normal(60).astype(dt)
        a[:3] = [np.nan, np.inf, -0.0]
    else:
        a = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, 60, dtype=dt, endpoint=True)
    arrays[dt] = a.reshape(3, 4, 5)
arrays['big_f'] = np.asfortranarray(rng.standard_normal((40, 30)).astype('>f8'))
arrays['empty'] = np.zeros((0, 4), dtype='float32')
arrays['scalar'] = np.array(1.5)
np.savez(f'{D}/stored.npz', **arrays)
np.savez_compressed(f'{D}/deflated.npz', **arrays)
for name, a in arrays.items():
    with open(f'{D}/{name}.bin', 'wb') as f:
        f.write(a.astype(a.dtype.newbyteorder('<')).tobytes(order='C'))
open(f'{D}/names', 'w').write(' '.join(arrays))
)";

TEST(NpzNumpy, ReadsSavezAndSavezCompressed) {
  TempDir dir;
  auto r = run_python("D = " + py_str(dir.path()) + kNumpyWritesNpz);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream names_in(read_text(dir.file("names")));
  std::vector<std::string> names;
  for (std::string n; names_in >> n;) names.push_back(n);
  ASSERT_EQ(names.size(), 15u);
  for (const char* file : {"stored.npz", "deflated.npz"}) {
    SCOPED_TRACE(file);
    NamedTensors all = io::read_npz(dir.file(file));
    ASSERT_EQ(all.size(), names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(all[i].first, names[i]);  // archive order is savez's order
      EXPECT_TRUE(raw_bytes(all[i].second) == read_text(dir.file(names[i] + ".bin"))) << names[i];
    }
    EXPECT_EQ(all[0].second.shape(), (Shape{3, 4, 5}));
    Tensor big = io::read_tensor(dir.file(file) + ":big_f");
    EXPECT_EQ(big.shape(), (Shape{40, 30}));
    EXPECT_EQ(big.dtype(), DType::F64);
  }
}

TEST(NpzNumpy, NumpyReadsWhatMhaWrites) {
  TempDir dir;
  NamedTensors tensors;
  std::string manifest;
  int n = 0;
  for (DType dt : all_dtypes()) {
    Tensor t = pattern_tensor(dt, {4, 3}, n++);
    std::string name = std::string("t_") + dtype_name(dt);
    Tensor expect = dt == DType::BF16 ? t.cast(DType::F32) : t;
    write_text(dir.file(name + ".bin"), raw_bytes(expect));
    manifest += name + " " + dtype_name(expect.dtype()) + "\n";
    tensors.emplace_back(name, t);
  }
  tensors.emplace_back("empty", Tensor(DType::F32, {0, 2}));
  write_text(dir.file("empty.bin"), "");
  manifest += "empty float32\n";
  write_text(dir.file("manifest"), manifest);
  io::write_npz(dir.file("out.npz"), tensors);
  // Deflated members through the same writer, as savez_compressed makes them.
  io::write_npy(dir.file("a.npy"), tensors[11].second);
  io::write_npy(dir.file("b.npy"), Tensor(DType::F64, {50, 50}));
  std::vector<io::detail::ZipMember> members = {{"a.npy", read_text(dir.file("a.npy"))},
                                                {"b.npy", read_text(dir.file("b.npy"))}};
  io::write_file_atomic(dir.file("deflated.npz"), io::detail::write_zip(members, true));

  auto r = run_python(R"(
import numpy as np, zipfile
D = )" + py_str(dir.path()) + R"(
z = np.load(f'{D}/out.npz')
names = [l.split()[0] for l in open(f'{D}/manifest')]
assert list(z.files) == names, (z.files, names)
for line in open(f'{D}/manifest'):
    name, dt = line.split()
    a = z[name]
    assert a.dtype == np.dtype(dt), (name, a.dtype)
    assert a.tobytes() == open(f'{D}/{name}.bin', 'rb').read(), name
assert zipfile.ZipFile(f'{D}/out.npz').testzip() is None
d = np.load(f'{D}/deflated.npz')
assert d['a'].dtype == np.float32 and d['a'].shape == (4, 3)
assert (d['b'] == 0).all() and d['b'].shape == (50, 50)
zf = zipfile.ZipFile(f'{D}/deflated.npz')
assert zf.testzip() is None
assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
print('ok')
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok\n");

  NamedTensors back = io::read_npz(dir.file("out.npz"));
  ASSERT_EQ(back.size(), tensors.size());
  for (std::size_t i = 0; i < back.size(); ++i) EXPECT_EQ(back[i].first, tensors[i].first);
  NamedTensors d = io::read_npz(dir.file("deflated.npz"));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].second.shape(), (Shape{50, 50}));
}

TEST(NpzNumpy, ReadsZip64ArchiveFromPythonZipfile) {
  TempDir dir;
  // A zip64 end record and zip64 extra fields in both local and central
  // headers, as Python writes for large archives.
  auto r = run_python(R"(
import numpy as np, zipfile, io
D = )" + py_str(dir.path()) + R"(
zipfile.ZIP64_LIMIT = 100  # force zip64 records for every size and offset
zipfile.ZIP_FILECOUNT_LIMIT = 1
with zipfile.ZipFile(f'{D}/z64.npz', 'w', compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
    for name in ['first', 'second']:
        buf = io.BytesIO()
        np.save(buf, np.arange(200, dtype='<f4') * (2 if name == 'second' else 1))
        with zf.open(name + '.npy', 'w', force_zip64=True) as f:
            f.write(buf.getvalue())
data = open(f'{D}/z64.npz', 'rb').read()
assert b'PK\x06\x06' in data and b'PK\x06\x07' in data  # zip64 end record and locator
assert data.count(b'\xff\xff\xff\xff') >= 6  # saturated 32-bit sizes and offsets
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  NamedTensors all = io::read_npz(dir.file("z64.npz"));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].first, "second");
  EXPECT_EQ(all[1].second.get_f64(199), 398.0);
}

TEST(Npz, ReadTensorSpecsAndClearErrors) {
  TempDir dir;
  io::write_npz(dir.file("m.npz"), {{"q", Tensor::from_f32({2}, {1, 2})}, {"k", Tensor::from_f32({1}, {3})}});
  EXPECT_EQ(io::read_tensor(dir.file("m.npz") + ":k").get_f64(0), 3.0);
  try {
    io::read_tensor(dir.file("m.npz") + ":v");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(dir.file("m.npz")), std::string::npos) << msg;
    EXPECT_NE(msg.find("no tensor 'v'; available: q, k"), std::string::npos) << msg;
  }
  try {
    io::read_tensor(dir.file("m.npz"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds 2 tensors (q, k)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(io::write_npz(dir.file("dup.npz"), {{"a", Tensor()}, {"a", Tensor()}}), InputError);
  EXPECT_FALSE(std::ifstream(dir.file("dup.npz")).good());
}

}  // namespace
}  // namespace mha::test
