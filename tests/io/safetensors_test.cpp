// .safetensors in both directions. Debian ships no python safetensors
// module, so Python writes and checks files with json + struct exactly as
// the reference implementation lays them out, with torch for bfloat16.
#include <map>
#include <sstream>

#include "io/tensor_file.h"
#include "io_test_util.h"

namespace mha::test {
namespace {

// Python helpers mirroring huggingface safetensors' serialize().
const char* kPyStHelpers = R"(
import json, struct
import numpy as np
RANK = {'BOOL': 0, 'U8': 1, 'I8': 2, 'I16': 5, 'U16': 6, 'F16': 7, 'BF16': 8, 'I32': 9, 'U32': 10,
        'F32': 11, 'F64': 12, 'I64': 13, 'U64': 14}
def st_bytes(tensors, metadata=None):
    # tensors: name -> (dtype, shape, raw bytes)
    order = sorted(tensors, key=lambda n: (-RANK[tensors[n][0]], n))
    header, off = {}, 0
    if metadata is not None:
        header['__metadata__'] = metadata
    for n in order:
        dt, shape, raw = tensors[n]
        header[n] = {'dtype': dt, 'shape': list(shape), 'data_offsets': [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    return struct.pack('<Q', len(h)) + h + b''.join(tensors[n][2] for n in order)
def st_parse(path):
    data = open(path, 'rb').read()
    (n,) = struct.unpack('<Q', data[:8])
    header = json.loads(data[8:8 + n])
    return n, header, data[8 + n:]
)";

TEST(Safetensors, ReadsFilesLaidOutAsTheReferenceWritesThem) {
  TempDir dir;
  auto r = run_python("D = " + py_str(dir.path()) + kPyStHelpers + R"(
import torch
rng = np.random.default_rng(11)
NP = {'BOOL': 'bool', 'U8': 'uint8', 'I8': 'int8', 'I16': 'int16', 'U16': 'uint16', 'F16': 'float16',
      'I32': 'int32', 'U32': 'uint32', 'F32': 'float32', 'F64': 'float64', 'I64': 'int64', 'U64': 'uint64'}
tensors = {}
for st, dt in NP.items():
    if dt == 'bool':
        a = rng.integers(0, 2, 24).astype(bool)
    elif dt.startswith('float'):
        a = rng.standard_normal(24).astype(dt)
    else:
        a = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, 24, dtype=dt, endpoint=True)
    tensors['t_' + st] = (st, (2, 3, 4), a.astype(a.dtype.newbyteorder('<')).tobytes())
bf = torch.randn(5, 3).to(torch.bfloat16)
tensors['t_BF16'] = ('BF16', (5, 3), bf.view(torch.int16).numpy().tobytes())
open(f'{D}/bf16_as_f32.bin', 'wb').write(bf.float().numpy().tobytes())
tensors['empty'] = ('F32', (0, 7), b'')
tensors['scalar'] = ('F64', (), struct.pack('<d', 2.25))
open(f'{D}/a.safetensors', 'wb').write(st_bytes(tensors, {'format': 'pt'}))
for name, (st, shape, raw) in tensors.items():
    open(f'{D}/{name}.bin', 'wb').write(raw)
    open(f'{D}/{name}.meta', 'w').write(st + ' ' + ' '.join(map(str, shape)))
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  NamedTensors all = io::read_safetensors(dir.file("a.safetensors"));
  ASSERT_EQ(all.size(), 15u);
  // Returned in data order: the reference's dtype rank, then name.
  EXPECT_EQ(all.front().first, "t_U64");
  EXPECT_EQ(all.back().first, "t_BOOL");
  const std::map<std::string, DType> st_names = {
      {"BOOL", DType::Bool}, {"U8", DType::U8},   {"I8", DType::I8},     {"I16", DType::I16}, {"U16", DType::U16},
      {"F16", DType::F16},   {"BF16", DType::BF16}, {"I32", DType::I32}, {"U32", DType::U32}, {"F32", DType::F32},
      {"F64", DType::F64},   {"I64", DType::I64},  {"U64", DType::U64}};
  for (const auto& [name, t] : all) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(raw_bytes(t) == read_text(dir.file(name + ".bin")));
    std::istringstream meta(read_text(dir.file(name + ".meta")));
    std::string st;
    meta >> st;
    Shape shape;
    for (int64_t d; meta >> d;) shape.push_back(d);
    EXPECT_EQ(t.dtype(), st_names.at(st));
    EXPECT_EQ(t.shape(), shape);
  }
  Tensor bf = io::read_tensor(dir.file("a.safetensors") + ":t_BF16");
  EXPECT_EQ(bf.dtype(), DType::BF16);
  EXPECT_EQ(bf.shape(), (Shape{5, 3}));
  EXPECT_TRUE(raw_bytes(bf.cast(DType::F32)) == read_text(dir.file("bf16_as_f32.bin")));
  EXPECT_EQ(io::read_tensor(dir.file("a.safetensors") + ":scalar").get_f64(0), 2.25);
  EXPECT_EQ(io::read_tensor(dir.file("a.safetensors") + ":empty").shape(), (Shape{0, 7}));
}

TEST(Safetensors, PythonReadsWhatMhaWrites) {
  TempDir dir;
  NamedTensors tensors;
  int n = 0;
  for (DType dt : all_dtypes()) {
    Tensor t = pattern_tensor(dt, {3, 2 + n % 3}, n);
    ++n;
    std::string name = std::string("z_") + dtype_name(dt);
    write_text(dir.file(name + ".bin"), raw_bytes(t));
    if (dt == DType::BF16) write_text(dir.file("bf16_as_f32.bin"), raw_bytes(t.cast(DType::F32)));
    tensors.emplace_back(name, t);
  }
  tensors.emplace_back("a_empty", Tensor(DType::F32, {0}));
  write_text(dir.file("a_empty.bin"), "");
  io::write_safetensors(dir.file("out.safetensors"), tensors);

  auto r = run_python("D = " + py_str(dir.path()) + kPyStHelpers + R"(
import torch
n, header, buf = st_parse(f'{D}/out.safetensors')
assert n % 8 == 0, n
raw = open(f'{D}/out.safetensors', 'rb').read()
assert raw[8:8 + n].rstrip(b' ').endswith(b'}') and raw[8:8 + n].decode().strip() == raw[8:8 + n].decode().rstrip()
names = list(header)
expect = sorted(names, key=lambda k: (-RANK[header[k]['dtype']], k))
assert names == expect, (names, expect)
DT = {'bool': 'BOOL', 'int8': 'I8', 'int16': 'I16', 'int32': 'I32', 'int64': 'I64', 'uint8': 'U8',
      'uint16': 'U16', 'uint32': 'U32', 'uint64': 'U64', 'float16': 'F16', 'bfloat16': 'BF16',
      'float32': 'F32', 'float64': 'F64'}
off = 0
for k in names:
    e = header[k]
    assert e['data_offsets'][0] == off, (k, e)
    off = e['data_offsets'][1]
    if k != 'a_empty':
        assert e['dtype'] == DT[k[2:]], (k, e)
    assert buf[e['data_offsets'][0]:off] == open(f'{D}/{k}.bin', 'rb').read(), k
assert off == len(buf)
e = header['z_bfloat16']
bf = torch.frombuffer(bytearray(buf[e['data_offsets'][0]:e['data_offsets'][1]]), dtype=torch.bfloat16)
assert bf.float().numpy().tobytes() == open(f'{D}/bf16_as_f32.bin', 'rb').read()
# A file the reference layout produces from the same tensors is byte for byte the same.
same = st_bytes({k: (header[k]['dtype'], header[k]['shape'], buf[header[k]['data_offsets'][0]:header[k]['data_offsets'][1]]) for k in names})
assert same == raw
print('ok')
)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "ok\n");

  NamedTensors back = io::read_safetensors(dir.file("out.safetensors"));
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : back) EXPECT_TRUE(raw_bytes(t) == read_text(dir.file(name + ".bin"))) << name;
}

TEST(Safetensors, PiecemealReaderReadsWhatTheWholeFileReaderReads) {
  TempDir dir;
  NamedTensors tensors;
  uint32_t seed = 0;
  for (DType dt : all_dtypes()) tensors.emplace_back(std::string("t_") + dtype_name(dt), pattern_tensor(dt, {3, 5}, seed++));
  tensors.emplace_back("empty", Tensor(DType::F32, {0, 4}));
  io::write_safetensors(dir.file("a.safetensors"), tensors);
  const NamedTensors whole = io::read_safetensors(dir.file("a.safetensors"));
  io::SafetensorsReader reader(dir.file("a.safetensors"));
  std::vector<std::string> names;
  for (const auto& nt : whole) names.push_back(nt.first);
  EXPECT_EQ(reader.names(), names);
  // In any order, each tensor alone.
  for (auto it = whole.rbegin(); it != whole.rend(); ++it) {
    SCOPED_TRACE(it->first);
    EXPECT_TRUE(reader.has(it->first));
    Tensor t = reader.read(it->first);
    EXPECT_EQ(t.dtype(), it->second.dtype());
    EXPECT_EQ(t.shape(), it->second.shape());
    EXPECT_EQ(raw_bytes(t), raw_bytes(it->second));
  }
  EXPECT_FALSE(reader.has("nope"));
  EXPECT_NE(error_of([&] { reader.read("nope"); }).find("a.safetensors: holds no tensor 'nope'"), std::string::npos);
}

TEST(Safetensors, WriterRejectsReservedAndDuplicateNames) {
  TempDir dir;
  EXPECT_THROW(io::write_safetensors(dir.file("x.safetensors"), {{"__metadata__", Tensor()}}), InputError);
  EXPECT_THROW(io::write_safetensors(dir.file("x.safetensors"), {{"a", Tensor()}, {"a", Tensor()}}), InputError);
  EXPECT_THROW(io::write_safetensors(dir.file("x.safetensors"), {{"bad\xff", Tensor()}}), InputError);
  EXPECT_FALSE(std::ifstream(dir.file("x.safetensors")).good());
}

}  // namespace
}  // namespace mha::test
