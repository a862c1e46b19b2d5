// The decode kernel's tunables (DecodeTuning) change its speed, never its
// bits: every cache format, every ISA instance this CPU runs, prefetch
// distances from none to far past the chunk, V blocks from one key to more
// than a chunk, every strip width and both AVX2 score batches give the
// defaults' scores, maxima, sums and outputs byte for byte. And the
// calibration's plumbing (cpu_decode_tuning.h), without timing anything
// that an assertion reads: a stored choice is reloaded, reported and run
// with the defaults' output bits, a fresh one is stored as reported, the
// defaults mode and small caches never calibrate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_decode_kernel.h"
#include "backends/cpu/cpu_decode_tuning.h"
#include "backends/cpu/kv_format.h"
#include "kv_rows.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/user_cache.h"

namespace mha {
namespace {

std::vector<cpu::DecodeTuning> tunings() {
  std::vector<cpu::DecodeTuning> out;
  auto with = [&](auto member, std::initializer_list<int64_t> values) {
    for (int64_t v : values) {
      cpu::DecodeTuning t;
      t.*member = static_cast<std::remove_reference_t<decltype(t.*member)>>(v);
      out.push_back(t);
    }
  };
  with(&cpu::DecodeTuning::prefetch, {0, 64, 2048, 1 << 20});
  with(&cpu::DecodeTuning::v_pace, {0, 4096, 65536, 1 << 20});
  with(&cpu::DecodeTuning::v_block, {1, 7, 16, 64, 100, 4096});
  with(&cpu::DecodeTuning::v_strip, {2, 3, 4});
  with(&cpu::DecodeTuning::score_keys, {2, 3});
  cpu::DecodeTuning all;
  all.prefetch = 4096, all.v_pace = 32768, all.v_block = 16, all.v_strip = 2, all.score_keys = 2;
  out.push_back(all);
  for (const auto& t : out) EXPECT_TRUE(cpu::decode_tuning_valid(t));
  return out;
}

struct Outputs {
  std::vector<float> s, o, m, l;
};

Outputs run(cpu::DecodeKernel kern, const cpu::DecodeChunk& base, const cpu::DecodeTuning& t) {
  const int64_t n = base.j1 - base.j0;
  Outputs r{std::vector<float>(base.G * n), std::vector<float>(base.G * base.dv), std::vector<float>(base.G),
            std::vector<float>(base.G)};
  cpu::DecodeChunk c = base;
  c.s = r.s.data(), c.o = r.o.data(), c.m = r.m.data(), c.l = r.l.data(), c.tune = t;
  kern(c);
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

TEST(DecodeTuning, EveryTuningGivesTheDefaultsBits) {
  std::mt19937 g(31);
  std::uniform_real_distribution<float> u(-1, 1);
  // G 8: two head quads; G 6: a quad and leftover heads. dh 128 / dv 128:
  // the Llama shape; dh 64 / dv 96: a strip and single vectors (96 is
  // whole blocks of every format). Keys 3 .. 1003: partial V blocks and
  // score batches, more keys than the farthest tested prefetch but one.
  struct Shape {
    int64_t G, dh, dv;
  };
  for (const Shape sh : {Shape{8, 128, 128}, Shape{6, 64, 96}})
    for (CacheDtype dt : kAllCacheDtypes) {
      SCOPED_TRACE(std::string(cache_dtype_name(dt)) + " G " + std::to_string(sh.G) + " dv " + std::to_string(sh.dv));
      const int64_t j0 = 3, j1 = 1003, rows = j1 + 5;
      std::vector<float> q(sh.G * sh.dh), k(rows * sh.dh), v(rows * sh.dv);
      for (auto* x : {&q, &k, &v})
        for (float& e : *x) e = u(g);
      const std::vector<unsigned char> kc = test::encode_rows(dt, k, rows, sh.dh);
      const std::vector<unsigned char> vc = test::encode_rows(dt, v, rows, sh.dv);
      cpu::DecodeChunk c;
      c.q = q.data(), c.k = kc.data(), c.v = vc.data(), c.dt = dt;
      c.kbytes = kv_row_bytes(dt, sh.dh), c.vbytes = kv_row_bytes(dt, sh.dv);
      c.j0 = j0, c.j1 = j1, c.G = sh.G, c.dh = sh.dh, c.dv = sh.dv, c.scale_log2 = 0.3f;
      for (cpu::DecodeKernel kern : cpu::decode_kernels()) {
        SCOPED_TRACE(cpu::decode_kernel_isa(kern));
        const Outputs want = run(kern, c, cpu::DecodeTuning{});
        // The resolved defaults are the defaults.
        const Outputs resolved = run(kern, c, cpu::decode_tuning_defaults(kern, dt));
        EXPECT_TRUE(same_bits(resolved.o, want.o));
        for (const cpu::DecodeTuning& t : tunings()) {
          const Outputs got = run(kern, c, t);
          EXPECT_TRUE(same_bits(got.s, want.s) && same_bits(got.o, want.o) && same_bits(got.m, want.m) &&
                      same_bits(got.l, want.l))
              << cpu::decode_tuning_json(t).dump();
        }
      }
    }
}

TEST(DecodeTuning, JsonKeepsValuesAndRefusesWhatTheKernelDoesNotTake) {
  cpu::DecodeTuning t;
  t.prefetch = 4096, t.v_pace = 65536, t.v_block = 64, t.v_strip = 3, t.score_keys = 2;
  EXPECT_EQ(cpu::decode_tuning_from_json(cpu::decode_tuning_json(t)), t);
  for (const char* bad : {R"({"prefetch":8192,"v_pace":16384,"v_block":0,"v_strip":4,"score_keys":4})",
                          R"({"prefetch":-1,"v_pace":16384,"v_block":32,"v_strip":4,"score_keys":4})",
                          R"({"prefetch":8192,"v_pace":16384,"v_block":32,"v_strip":9,"score_keys":4})",
                          R"({"prefetch":8192,"v_pace":16384,"v_block":32,"v_strip":4})",
                          R"({"prefetch":"8K","v_pace":16384,"v_block":32,"v_strip":4,"score_keys":4})", "[]"})
    EXPECT_FALSE(cpu::decode_tuning_from_json(nlohmann::json::parse(bad))) << bad;
}

// MHA_CACHE_DIR pointed at a temporary folder for the test's lifetime.
class CacheDir {
 public:
  CacheDir() { setenv("MHA_CACHE_DIR", dir_.path().c_str(), 1); }
  ~CacheDir() { unsetenv("MHA_CACHE_DIR"); }

 private:
  test::TempDir dir_;
};

TEST(DecodeTuning, DefaultsModeAndSmallCachesNeverCalibrate) {
  CacheDir dir;
  ThreadPool pool(1);
  const cpu::DecodeShape s{CacheDtype::Float16, 4, 64, 64};
  const cpu::DecodeKernel k = cpu::decode_kernel();
  cpu::DecodeTuner def(cpu::DecodeTuningMode::Defaults);
  const cpu::DecodeCalibration a = def.tuning_for(k, s, pool, int64_t{1} << 40);
  EXPECT_EQ(a.source, "defaults");
  EXPECT_EQ(a.tune, cpu::decode_tuning_defaults(k, s.dt));
  cpu::DecodeTuner aut(cpu::DecodeTuningMode::Auto);
  const cpu::DecodeCalibration b = aut.tuning_for(k, s, pool, cpu::kCalibrationBytes - 1);
  EXPECT_EQ(b.source, "defaults");
  EXPECT_EQ(b.tune, cpu::decode_tuning_defaults(k, s.dt));
  EXPECT_FALSE(user_cache_get("decode_calibration", b.key));
  EXPECT_EQ(aut.describe()["last"]["source"], "defaults");
  EXPECT_EQ(aut.describe()["last"]["why"], "a cache below 24 MiB");
}

TEST(DecodeTuning, FreshCalibrationIsStoredAsReported) {
  CacheDir dir;
  ThreadPool pool(2);
  const cpu::DecodeShape s{CacheDtype::Bfloat16, 4, 128, 128};
  for (cpu::DecodeKernel k : cpu::decode_kernels()) {
    SCOPED_TRACE(cpu::decode_kernel_isa(k));
    cpu::DecodeTuner fresh(cpu::DecodeTuningMode::Fresh);
    const cpu::DecodeCalibration c = fresh.tuning_for(k, s, pool, 0);
    EXPECT_EQ(c.source, "calibrated");
    EXPECT_TRUE(cpu::decode_tuning_valid(c.tune));
    EXPECT_GT(c.default_ms, 0);
    EXPECT_EQ(c.key, cpu::decode_calibration_key(k, s, 2));
    const auto stored = user_cache_get("decode_calibration", c.key);
    ASSERT_TRUE(stored);
    EXPECT_EQ(cpu::decode_tuning_from_json(*stored), c.tune);
    const nlohmann::json d = fresh.describe();
    EXPECT_EQ(d["mode"], "fresh");
    EXPECT_EQ(d["last"]["text"], c.text());
    EXPECT_EQ(d["last"]["source"], "calibrated");
    // The same tuner does not calibrate the same shape twice.
    EXPECT_EQ(fresh.tuning_for(k, s, pool, 0).seconds, c.seconds);
  }
}

// A stored tuning (not the defaults) is what an auto session runs and what
// the backend reports, with the output bits of a defaults backend.
TEST(DecodeTuning, StoredChoiceIsReloadedReportedAndKeepsTheBits) {
  CacheDir dir;
  std::mt19937 g(7);
  AttentionSpec spec;
  spec.variant = "test";
  spec.num_heads = 8, spec.num_kv_heads = 2, spec.head_dim = 64, spec.head_dim_v = 64;
  spec.q = test::rand_proj(g, 8 * 64, 32, false);
  spec.k = test::rand_proj(g, 2 * 64, 32, false);
  spec.v = test::rand_proj(g, 2 * 64, 32, false);
  spec.scale = 0.125, spec.causal = true;
  DecodeOptions opt;
  opt.cache_dtype = CacheDtype::Float32;
  // A cache past kCalibrationBytes, allocated but never touched beyond
  // the few rows written: large enough for auto to look the tuning up.
  opt.max_tokens = cpu::kCalibrationBytes / (2 * 2 * 64 * 4) + 1;
  cpu::DecodeTuning stored;
  stored.prefetch = 2048, stored.v_pace = 4096, stored.v_block = 7, stored.v_strip = 2, stored.score_keys = 2;
  const cpu::DecodeKernel k = cpu::decode_kernel();
  const std::string key = cpu::decode_calibration_key(k, {opt.cache_dtype, 4, 64, 64}, 2);
  ASSERT_TRUE(user_cache_put("decode_calibration", key, cpu::decode_tuning_json(stored)));
  const Tensor x = test::rand_tensor(g, {1, 300, 32}, -1, 1);
  std::vector<float> out[2];
  for (int i = 0; i < 2; ++i) {
    auto be = make_cpu_backend({{"threads", 2}, {"decode_tuning", i ? "auto" : "defaults"}}, "backend");
    auto sess = be->start_decode(spec, opt);
    sess->append(Tensor::from_f32({1, 299, 32}, std::vector<float>(x.data<float>(), x.data<float>() + 299 * 32)));
    out[i] = sess->append(Tensor::from_f32({1, 1, 32}, std::vector<float>(x.data<float>() + 299 * 32, x.data<float>() + 300 * 32)))
                 .to_f32();
    const nlohmann::json d = be->describe()["decode_tuning"];
    EXPECT_EQ(d["mode"], i ? "auto" : "defaults");
    EXPECT_EQ(d["last"]["source"], i ? "stored" : "defaults");
    if (i) {
      EXPECT_EQ(cpu::decode_tuning_from_json(d["last"]), stored);
    }
  }
  EXPECT_TRUE(same_bits(out[0], out[1]));
}

TEST(DecodeTuning, BackendOptionTakesTheThreeModesOnly) {
  for (const char* m : {"auto", "defaults", "fresh"})
    EXPECT_EQ(make_cpu_backend({{"decode_tuning", m}}, "b")->describe()["decode_tuning"]["mode"], m);
  EXPECT_THROW(make_cpu_backend({{"decode_tuning", "fast"}}, "b"), InputError);
  EXPECT_THROW(make_cpu_backend({{"decode_tuning", 1}}, "b"), InputError);
}

// Bench rows carry the tuning their decode kernel ran: json/jsonl as an
// object, csv as its one-line text, md as a note under the table.
TEST(DecodeTuning, BenchRowsReportTheTuning) {
  CacheDir dir;
  const std::string args =
      "bench --no-progress --probe-mib 16 --hidden 128 --heads 4 --kv-heads 2 -r 1 --warmup 0 -p 0 -n 2 -d 40 -t 1 "
      "--backend-option decode_tuning=defaults";
  test::CommandResult r = test::run_mha(args + " -o jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json row = nlohmann::json::parse(r.out);
  EXPECT_EQ(row["decode_tuning"]["source"], "defaults");
  const cpu::DecodeTuning def = cpu::decode_tuning_defaults(cpu::decode_kernel(), CacheDtype::Float32);
  EXPECT_EQ(cpu::decode_tuning_from_json(row["decode_tuning"]), def);
  const std::string text = row["decode_tuning"]["text"];
  r = test::run_mha(args + " -o csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(",decode_tuning\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(",defaults: " + text + "\n"), std::string::npos) << r.out;
  r = test::run_mha(args + " -o md");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("decode tuning at 1 threads, float32: defaults: " + text), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mha
