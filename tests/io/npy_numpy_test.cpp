// .npy against numpy itself: numpy writes every dtype, order, byte order and
// format version and mha must read the same bits; mha writes and numpy must
// read back the same bits.
#include <fstream>
#include <sstream>

#include "io/tensor_file.h"
#include "io_test_util.h"

namespace mha::test {
namespace {

TEST(NpyNumpy, ReadsEveryDtypeOrderByteOrderAndVersion) {
  TempDir dir;
  auto r = run_python(R"(
import numpy as np
from numpy.lib import format as fmt
D = )" + py_str(dir.path()) + R"(
rng = np.random.default_rng(7)
dtypes = ['bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64',
          'float16', 'float32', 'float64']
shapes = [(2, 3, 4), (), (0,), (5,), (1, 0, 3), (2, 3, 1, 2)]
lines = []
n = 0
for dt in dtypes:
    for si, shape in enumerate(shapes):
        size = int(np.prod(shape))
        if dt == 'bool':
            a = rng.integers(0, 2, size).astype(bool)
        elif dt.startswith('float'):
            a = (rng.standard_normal(size) * 1000).astype(dt)
            if size >= 6:
                a[:6] = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-42, 6e-8]).astype(dt)
        else:
            info = np.iinfo(dt)
            a = rng.integers(info.min, info.max, size, dtype=dt, endpoint=True)
        a = a.reshape(shape)
        for order in 'CF':
            for bo in '<>':
                for ver in [(1, 0), (2, 0), (3, 0)]:
                    if si > 0 and ver != (1, 0) and bo == '>':
                        continue  # versions are covered by the main shape
                    b = a.astype(a.dtype.newbyteorder(bo))
                    b = b.copy(order=order)  # ascontiguousarray would make 0-d arrays 1-d
                    name = f'c{n}'
                    n += 1
                    with open(f'{D}/{name}.npy', 'wb') as f:
                        fmt.write_array(f, b, version=ver)
                    with open(f'{D}/{name}.bin', 'wb') as f:
                        f.write(a.astype(a.dtype.newbyteorder('<')).tobytes(order='C'))
                    assert b.shape == shape and (order == 'C' or b.ndim < 2 or b.flags.f_contiguous)
                    lines.append(f'{name} {dt} {order} {bo} {ver[0]} ' + ' '.join(map(str, shape)))
open(f'{D}/manifest', 'w').write('\n'.join(lines) + '\n')
# numpy.save of a Fortran array writes fortran_order True, with default version.
np.save(f'{D}/fsave.npy', np.asfortranarray(np.arange(24, dtype='<f4').reshape(2, 3, 4)))
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream manifest(read_text(dir.file("manifest")));
  std::string line;
  int cases = 0, fortran = 0, big = 0;
  while (std::getline(manifest, line)) {
    std::istringstream ls(line);
    std::string name, dt, order, bo;
    int major;
    ls >> name >> dt >> order >> bo >> major;
    Shape shape;
    for (int64_t d; ls >> d;) shape.push_back(d);
    SCOPED_TRACE(line);
    Tensor t = io::read_npy(dir.file(name + ".npy"));
    EXPECT_EQ(dtype_name(t.dtype()), dt);
    EXPECT_EQ(t.shape(), shape);
    EXPECT_TRUE(raw_bytes(t) == read_text(dir.file(name + ".bin"))) << "bytes differ";
    ++cases;
    fortran += order == "F";
    big += bo == ">";
  }
  EXPECT_GE(cases, 200);
  EXPECT_GT(fortran, 50);
  EXPECT_GT(big, 50);
  Tensor f = io::read_npy(dir.file("fsave.npy"));
  ASSERT_EQ(f.shape(), (Shape{2, 3, 4}));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(f.get_f64(i), i);
}

TEST(NpyNumpy, NumpyReadsWhatMhaWrites) {
  TempDir dir;
  std::string manifest;
  int n = 0;
  for (DType dt : all_dtypes()) {
    for (const Shape& shape : {Shape{2, 3, 4}, Shape{}, Shape{0}, Shape{7}, Shape{3, 0, 2}}) {
      Tensor t = pattern_tensor(dt, shape, n);
      std::string name = "w" + std::to_string(n++);
      io::write_npy(dir.file(name + ".npy"), t);
      // bfloat16 is written as float32 (numpy has no bfloat16).
      Tensor expect = dt == DType::BF16 ? t.cast(DType::F32) : t;
      write_text(dir.file(name + ".bin"), raw_bytes(expect));
      manifest += name + " " + dtype_name(expect.dtype());
      for (int64_t d : shape) manifest += " " + std::to_string(d);
      manifest += "\n";
    }
  }
  write_text(dir.file("manifest"), manifest);
  auto r = run_python(R"(
import numpy as np
D = )" + py_str(dir.path()) + R"(
count = 0
for line in open(f'{D}/manifest'):
    name, dt, *shape = line.split()
    a = np.load(f'{D}/{name}.npy', allow_pickle=False)
    assert a.dtype == np.dtype(dt), (name, a.dtype, dt)
    assert a.shape == tuple(map(int, shape)), (name, a.shape, shape)
    assert a.flags.c_contiguous
    assert a.tobytes() == open(f'{D}/{name}.bin', 'rb').read(), name
    with open(f'{D}/{name}.npy', 'rb') as f:
        assert np.lib.format.read_magic(f) == (1, 0)
        f.seek(0)
        header_end = 10 + int.from_bytes(f.read(10)[8:10], 'little')
        assert header_end % 64 == 0, (name, header_end)
    count += 1
print(count)
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, std::to_string(n) + "\n");
}

TEST(NpyNumpy, MhaReadsBackWhatItWrites) {
  TempDir dir;
  int n = 0;
  for (DType dt : all_dtypes()) {
    Tensor t = pattern_tensor(dt, {3, 5}, n++);
    io::write_npy(dir.file("x.npy"), t);
    Tensor back = io::read_npy(dir.file("x.npy"));
    Tensor expect = dt == DType::BF16 ? t.cast(DType::F32) : t;
    EXPECT_EQ(back.dtype(), expect.dtype());
    EXPECT_EQ(back.shape(), expect.shape());
    EXPECT_TRUE(raw_bytes(back) == raw_bytes(expect)) << dtype_name(dt);
  }
}

TEST(Npy, ToleratesHeaderSpacingAndPython2Longs) {
  TempDir dir;
  std::string dict = "{ \"shape\" : (2L,3L) ,'fortran_order':False,\n 'descr':'=f8'}  \n";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(dict.size());
  bytes += '\0';
  bytes += dict;
  for (int i = 0; i < 6; ++i) {
    double v = i * 0.5;
    bytes.append(reinterpret_cast<const char*>(&v), 8);
  }
  write_text(dir.file("h.npy"), bytes);
  Tensor t = io::read_npy(dir.file("h.npy"));
  ASSERT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.get_f64(5), 2.5);
}

}  // namespace
}  // namespace mha::test
