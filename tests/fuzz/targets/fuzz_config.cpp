// Run configs: the JSON text check and parse (config/json_util.cpp), the
// config schema (config/config.cpp), then what `mha run` does with it before
// any weights are made: the variant's params and options, and the backend's
// options (except the cpu backend's, whose constructor starts its threads).
// The same bytes are also read as a `bench --suite` file.
#include "backends/backend.h"
#include "bench/bench.h"
#include "config/config.h"
#include "util/json_util.h"
#include "fuzz_common.h"
#include "variants/variant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace mha;
  ordered_json j;
  try {
    j = parse_json_text(fuzz::as_view(data, size), "fuzz.json", "config file");
  } catch (const InputError&) {
    return 0;
  }
  fuzz::run_expecting_input_errors([&] {
    RunConfig c = parse_config(j, "/nonexistent", "fuzz.json");
    auto v = make_variant(c.variant, c.params);
    v->parse_options(c.options);
    if (c.backend != "cpu") make_backend(c.backend, c.backend_options, "backend");
  });
  fuzz::run_expecting_input_errors([&] { bench::parse_suite(j, "fuzz.json"); });
  return 0;
}
