#pragma once
// Random head-parallel configs for the bitwise tests: shapes whose heads
// split into `parts` shares (GQA groups whole), over the projection layouts
// and per-head options that could make a share's bits differ from one
// process's: fused q|k|v (llama, self-attention) and separate projections
// (torch_mha cross-attention, kdim/vdim), grouped and MQA-like kv heads,
// rope, a sliding window, causal masks, bias_k/bias_v and a zero key, and
// batches x lengths that cross the projections' row groups (768 rows) off a
// 48-row boundary.
#include <cstdint>
#include <random>
#include <string>

namespace mha::test {

// One config drawn from `rng` (deterministic per seed); `backend` is a JSON
// value ("\"cpu\"" or {"name": ..., "threads": ...}); parts == 0 omits the
// "parallel" key (the one-process run).
inline std::string random_heads_config(std::mt19937& rng, int64_t parts, int64_t draw_parts, const std::string& backend) {
  auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  const std::string par = parts ? R"(, "parallel": {"heads": )" + std::to_string(parts) + "}" : "";
  const int64_t B = pick({1, 2, 3, 9}), L = pick({5, 37, 100, 130, 200});
  const bool llama = rng() % 3 != 0;
  if (llama) {
    // kv heads a multiple of the parts; 1 to 4 query heads per kv head
    // (with one share, hpg 4 and 1 kv head is MQA).
    const int64_t kv = draw_parts * pick({1, 2}), hpg = pick({1, 2, 3, 4}), dh = pick({8, 16, 24});
    const int64_t hidden = pick({32, 48, 64});
    return R"({"variant": "llama_attention", "params": {"hidden_size": )" + std::to_string(hidden) +
           R"(, "num_attention_heads": )" + std::to_string(kv * hpg) + R"(, "num_key_value_heads": )" +
           std::to_string(kv) + R"(, "head_dim": )" + std::to_string(dh) + R"(, "attention_bias": )" +
           (rng() % 2 ? "true" : "false") + R"(, "sliding_window": )" + std::string(rng() % 2 ? "null" : rng() % 2 ? "17" : "64") +
           R"(}, "weights": {"init": "torch", "seed": )" + std::to_string(rng() % 1000) + R"(}, "inputs": {"seed": )" +
           std::to_string(rng() % 1000) + R"(, "x": {"randn": [)" + std::to_string(B) + ", " + std::to_string(L) +
           ", " + std::to_string(hidden) + R"(]}}, "backend": )" + backend + par + "}";
  }
  const int64_t h = draw_parts * pick({1, 2, 3}), e = h * pick({8, 16}), S = pick({L, L, 9, 70});
  const int64_t kdim = pick({e, e, 24}), vdim = pick({e, 40});
  auto x = [&](int64_t len, int64_t dim) {
    return R"({"randn": [)" + std::to_string(len) + ", " + std::to_string(B) + ", " + std::to_string(dim) + "]}";
  };
  return R"({"variant": "torch_mha", "params": {"embed_dim": )" + std::to_string(e) + R"(, "num_heads": )" +
         std::to_string(h) + R"(, "kdim": )" + std::to_string(kdim) + R"(, "vdim": )" + std::to_string(vdim) +
         R"(, "add_bias_kv": )" + (rng() % 2 ? "true" : "false") + R"(, "add_zero_attn": )" +
         (rng() % 2 ? "true" : "false") + R"(}, "weights": {"init": "torch", "seed": )" + std::to_string(rng() % 1000) +
         R"(}, "inputs": {"seed": )" + std::to_string(rng() % 1000) + R"(, "query": )" + x(L, e) + R"(, "key": )" +
         x(S, kdim) + R"(, "value": )" + x(S, vdim) + R"(}, "options": {"need_weights": false, "is_causal": )" +
         (S == L && rng() % 2 ? "true" : "false") + R"(}, "backend": )" + backend + par + "}";
}

}  // namespace mha::test
