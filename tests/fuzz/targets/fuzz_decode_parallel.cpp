// The config's "decode" and "parallel" sections (config/config.cpp) and what a
// run derives from them before any weights are read: the KV cache's size
// check (backends/decode.cpp, check_decode_options, sized against physical
// memory) and the ring's split of the tokens (parallel/ring.cpp,
// ring_chunks). The input is a JSON object whose keys go beside a small
// llama_attention config, so "decode" and "parallel" (and their neighbours)
// are what varies.
#include "backends/decode.h"
#include "config/config.h"
#include "util/json_util.h"
#include "fuzz_common.h"
#include "parallel/ring.h"
#include "variants/variant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace mha;
  ordered_json j;
  try {
    j = parse_json_text(fuzz::as_view(data, size), "fuzz.json", "config file");
  } catch (const InputError&) {
    return 0;
  }
  if (!j.is_object()) return 0;
  if (!j.contains("variant")) j["variant"] = "llama_attention";
  if (!j.contains("params")) j["params"] = {{"hidden_size", 8}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}};
  fuzz::run_expecting_input_errors([&] {
    RunConfig c = parse_config(j, "/nonexistent", "fuzz.json");
    if (c.decode) {
      const DecodeConfig& d = *c.decode;
      fuzz::require(d.prompt >= 1 && d.tokens >= 0 && d.depth >= 0 && d.depth <= kMaxDecodeDepth, "decode bounds");
      fuzz::require(d.depth <= INT64_MAX - d.prompt - d.tokens, "decode positions fit in 64 bits");
      AttentionSpec spec;
      spec.num_heads = 2, spec.num_kv_heads = 1, spec.head_dim = spec.head_dim_v = 4, spec.causal = true;
      DecodeOptions opt;
      opt.cache_dtype = d.cache_dtype;
      opt.batch = 1;
      opt.max_tokens = d.depth + d.prompt + d.tokens;
      check_decode_options(spec, opt);
    }
    if (c.parallel) {
      fuzz::require(c.parallel->ranks >= 1, "parallel ranks >= 1");
      const int64_t L = c.decode ? c.decode->prompt : 16;
      for (bool causal : {false, true}) {
        int64_t rows = 0;
        for (int64_t r = 0; r < std::min<int64_t>(c.parallel->ranks, 64); ++r)
          for (const auto& [start, len] : parallel::ring_chunks(L, r, c.parallel->ranks, causal)) {
            fuzz::require(start >= 0 && len >= 0 && start + len <= L, "ring chunk inside the sequence");
            rows += len;
          }
        fuzz::require(c.parallel->ranks > 64 || rows == L, "ring chunks cover the sequence once");
      }
    }
  });
  return 0;
}
