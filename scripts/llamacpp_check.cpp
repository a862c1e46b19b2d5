// Sanity check for scripts/bench_llamacpp.py, built by it against the llama.cpp release it
// benchmarks (llama.h from that release's source, libllama from its prebuilt CPU build): a fast
// llama-bench row means nothing if the layer computes garbage, and llama-bench never looks at
// its logits. Not part of mha's build.
//
//   llamacpp_check MODEL.gguf DEPTH THREADS
//
// Fills DEPTH positions, then decodes 512 more tokens with logits (one ubatch, so flash attention
// takes the tiled path the bench times), once with flash attention and a float32 K/V cache
// (what the bench times) and once without flash attention. Prints one JSON
// line: the ggml CPU variant mapped into this process and the features it was built with
// (llama_print_system_info: AVX512, LLAMAFILE's sgemm, ...), whether every logit is finite, their
// spread, and how far the two attention paths differ. Exit 1 when a logit is not finite, the
// logits do not vary, or the two paths disagree beyond what float16 K/V rounding explains:
// llama.cpp casts a float32 cache to float16 before flash attention (llama-graph.cpp,
// build_attn_mha), so the paths differ by that rounding; a wrong mask or position does not
// stay near it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

constexpr int kTail = 512;   // tokens decoded with logits after the depth: one ubatch, as the bench times
constexpr int kBatch = 512;  // n_batch = n_ubatch, as the bench runs llama-bench

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

// The libggml-cpu-<variant>.so that ggml's loader picked, from this process's own mappings.
std::string cpu_variant() {
  std::ifstream maps("/proc/self/maps");
  const std::string key = "libggml-cpu-";
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find(key);
    if (at == std::string::npos) continue;
    const size_t end = line.find(".so", at);
    return line.substr(at + key.size(), end - at - key.size());
  }
  return "unknown";
}

// llama_print_system_info()'s "CPU : AVX2 = 1 | ... | " as one JSON string value.
std::string system_info_json() {
  std::string s = llama_print_system_info(), out;
  while (!s.empty() && (s.back() == ' ' || s.back() == '|')) s.pop_back();
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c != '\n') out += c;
  }
  return '"' + out + '"';
}

bool decode(llama_context* ctx, const std::vector<llama_token>& tokens, int pos0, bool all_logits) {
  llama_batch batch = llama_batch_init((int32_t)tokens.size(), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = pos0 + (llama_pos)i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = all_logits;
  }
  batch.n_tokens = (int32_t)tokens.size();
  const bool ok = llama_decode(ctx, batch) == 0;
  llama_batch_free(batch);
  return ok;
}

// Logits of the kTail tokens after `depth` positions (token ids fixed, so both runs see the same).
std::vector<float> tail_logits(llama_model* model, int depth, int threads, llama_flash_attn_type fa) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(depth + kTail);
  cp.n_batch = cp.n_ubatch = kBatch;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.flash_attn_type = fa;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return {};
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  auto token = [&](int i) { return (llama_token)((i * 7 + 3) % n_vocab); };
  std::vector<float> out;
  bool ok = true;
  for (int p = 0; ok && p < depth; p += kBatch) {
    std::vector<llama_token> chunk;
    for (int i = p; i < std::min(depth, p + kBatch); ++i) chunk.push_back(token(i));
    ok = decode(ctx, chunk, p, false);
  }
  std::vector<llama_token> tail;
  for (int i = depth; i < depth + kTail; ++i) tail.push_back(token(i));
  if (ok && decode(ctx, tail, depth, true)) {
    for (int i = 0; i < kTail; ++i) {
      const float* l = llama_get_logits_ith(ctx, i);
      out.insert(out.end(), l, l + n_vocab);
    }
  }
  llama_free(ctx);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL.gguf DEPTH THREADS\n", argv[0]);
    return 2;
  }
  const int depth = atoi(argv[2]), threads = atoi(argv[3]);
  llama_log_set(quiet_log, nullptr);
  ggml_backend_load_all();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return fprintf(stderr, "llamacpp_check: cannot load %s\n", argv[1]), 1;
  const std::vector<float> fa = tail_logits(model, depth, threads, LLAMA_FLASH_ATTN_TYPE_ENABLED);
  const std::vector<float> ref = tail_logits(model, depth, threads, LLAMA_FLASH_ATTN_TYPE_DISABLED);
  llama_model_free(model);
  if (fa.empty() || fa.size() != ref.size()) return fprintf(stderr, "llamacpp_check: decode failed\n"), 1;

  bool finite = true;
  double max_abs = 0, diff = 0, sum = 0, sum2 = 0, d2 = 0, r2 = 0;
  for (size_t i = 0; i < fa.size(); ++i) {
    finite = finite && std::isfinite(fa[i]) && std::isfinite(ref[i]);
    max_abs = std::max(max_abs, (double)std::fabs(fa[i]));
    diff = std::max(diff, (double)std::fabs(fa[i] - ref[i]));
    sum += fa[i], sum2 += (double)fa[i] * fa[i];
    d2 += (double)(fa[i] - ref[i]) * (fa[i] - ref[i]), r2 += (double)ref[i] * ref[i];
  }
  const double mean = sum / fa.size(), sd = std::sqrt(std::max(0.0, sum2 / fa.size() - mean * mean));
  const double rel_l2 = r2 > 0 ? std::sqrt(d2 / r2) : 0;
  // float16 keeps 11 significant bits (rounding <= 2^-12 relative): through the layer the
  // logits move by about 3e-4 relative (depth 0 to 2000 on the Llama-3-8B layer); 2e-3 leaves
  // room for other shapes and still catches a wrong mask or position (order 1).
  const bool ok = finite && sd > 0 && rel_l2 <= 2e-3;
  printf("{\"check\": \"%s\", \"ggml_cpu_variant\": \"%s\", \"depth\": %d, \"threads\": %d, "
         "\"logits_finite\": %s, \"logits_max_abs\": %.6g, \"logits_sd\": %.6g, "
         "\"flash_vs_plain_max_abs_diff\": %.6g, \"flash_vs_plain_rel_l2\": %.6g, \"system_info\": %s}\n",
         ok ? "ok" : "failed", cpu_variant().c_str(), depth, threads, finite ? "true" : "false", max_abs, sd, diff,
         rel_l2, system_info_json().c_str());
  return ok ? 0 : 1;
}
