// `mha op update-cache` and `mha op fill-cache`: ttnn.update_cache /
// ttnn.experimental.paged_update_cache and ttnn.fill_cache from the ops'
// params (positions, page table, user) over TT-NN's defaults.
#include <optional>
#include <string>
#include <vector>

#include "backends/ttsim/ops/kv_cache/kv_cache.h"
#include "backends/ttsim/ops/op_table.h"
#include "util/error.h"

namespace mha::ttsim {

namespace {

// update-cache's params: ttnn.update_cache's or paged_update_cache's
// runtime arguments (exactly one of update_idx and cur_pos).
struct UpdateCacheParams {
  std::optional<int64_t> update_idx, batch_offset;
  std::vector<int64_t> cur_pos;
  std::vector<std::vector<int64_t>> page_table;
  template <class V>
  void fields(V& v) {
    const unsigned flag = fields::kRuntime | fields::kFlag;
    v("update_idx", update_idx, "ttnn.update_cache's position (--update-idx)", flag);
    v("batch_offset", batch_offset, "ttnn.update_cache's first user (--batch-offset)", flag);
    v("cur_pos", cur_pos, "paged_update_cache's positions, -1 skips a user (--cur-pos)", flag);
    v("page_table", page_table, "paged_update_cache's [b][blocks] block ids (--page-table FILE)", flag);
  }
};

UpdateCacheParams update_params(const nlohmann::ordered_json& p) {
  UpdateCacheParams u;
  fields::parse_into(u, p, "op options", "update-cache option");
  check_positions(u.cur_pos, true);
  if (!u.page_table.empty()) check_page_table(u.page_table);
  return u;
}

void check_update_cache(const OpCheck& c) {
  require_4d(c, "update-cache");
  const UpdateCacheParams u = update_params(c.params);
  const bool idx = u.update_idx.has_value(), pos = !u.cur_pos.empty();
  if (idx == pos)
    throw InputError("update-cache: give --update-idx N (ttnn.update_cache) or --cur-pos P,... (paged_update_cache), "
                     "exactly one");
  if (idx && !u.page_table.empty())
    throw InputError("update-cache: --page-table goes with --cur-pos (paged_update_cache), not --update-idx");
  if (pos && u.batch_offset)
    throw InputError("update-cache: --batch-offset goes with --update-idx (ttnn.update_cache), not --cur-pos");
}

TileTensor run_update_cache_op(OpCall& c) {
  CacheAttributes at;
  at.write = {c.opt.fp32_dest_acc_en.value_or(false), c.opt.bfp8_pack_precise.value_or(false)};
  if (c.out_format != c.in[0].format)
    throw InputError("update-cache: the output is the cache, in its dtype; --output-dtype does not apply");
  const UpdateCacheParams u = update_params(c.params);
  TileTensor cache = c.in[0];
  if (u.update_idx)
    run_update_cache(c.dev, cache, c.in[1], *u.update_idx, u.batch_offset.value_or(0), at);
  else
    run_paged_update_cache(c.dev, cache, c.in[1], u.cur_pos, u.page_table.empty() ? nullptr : &u.page_table, at);
  c.info["compute_kernel_config"] = {{"fp32_dest_acc_en", at.write.fp32_dest_acc_en}};
  c.info["attributes"] = fields::json_of(at);
  return cache;
}

struct FillCacheParams {
  std::optional<int64_t> batch_idx;
  int64_t update_idx = 0;
  template <class V>
  void fields(V& v) {
    const unsigned flag = fields::kRuntime | fields::kFlag;
    v("batch_idx", batch_idx, "the user (--batch-idx), required", flag);
    v("update_idx", update_idx, "the first row, a multiple of 32 (--update-idx; default 0)", flag);
  }
};

FillCacheParams fill_params(const nlohmann::ordered_json& p) {
  FillCacheParams f;
  fields::parse_into(f, p, "op options", "fill-cache option");
  return f;
}

void check_fill_cache(const OpCheck& c) {
  require_4d(c, "fill-cache");
  if (!fill_params(c.params).batch_idx) throw InputError("fill-cache: --batch-idx N (the batch_idx param) is required");
}

TileTensor run_fill_cache_op(OpCall& c) {
  if (c.out_format != c.in[0].format)
    throw InputError("fill-cache: the output is the cache, in its dtype; --output-dtype does not apply");
  const FillCacheParams f = fill_params(c.params);
  TileTensor cache = c.in[0];
  run_fill_cache(c.dev, cache, c.in[1], *f.batch_idx, f.update_idx);
  return cache;
}

// paged-fused-update-cache's params: the positions (required) and the
// optional page table, as paged_update_cache takes them.
struct FusedUpdateParams {
  std::vector<int64_t> cur_pos;
  std::vector<std::vector<int64_t>> page_table;
  template <class V>
  void fields(V& v) {
    const unsigned flag = fields::kRuntime | fields::kFlag;
    v("cur_pos", cur_pos, "the positions, -1 skips a user (--cur-pos), required", flag);
    v("page_table", page_table, "[b][blocks] block ids (--page-table FILE)", flag);
  }
};

FusedUpdateParams fused_update_params(const nlohmann::ordered_json& p) {
  FusedUpdateParams f;
  fields::parse_into(f, p, "op options", "paged-fused-update-cache option");
  check_positions(f.cur_pos, true);
  if (!f.page_table.empty()) check_page_table(f.page_table);
  return f;
}

void check_fused_update(const OpCheck& c) {
  require_4d(c, "paged-fused-update-cache");
  if (fused_update_params(c.params).cur_pos.empty())
    throw InputError("paged-fused-update-cache: --cur-pos P,... (the cur_pos param) is required");
}

// Both updated caches, stacked: out[0] = CACHE1, out[1] = CACHE2.
TileTensor run_fused_update_op(OpCall& c) {
  CacheAttributes at;
  at.write = {c.opt.fp32_dest_acc_en.value_or(false), c.opt.bfp8_pack_precise.value_or(false)};
  if (c.out_format != c.in[0].format)
    throw InputError("paged-fused-update-cache: the output is the caches, in their dtype; --output-dtype does not apply");
  const FusedUpdateParams f = fused_update_params(c.params);
  TileTensor k = c.in[0], v = c.in[2];
  run_paged_fused_update_cache(c.dev, k, c.in[1], v, c.in[3], f.cur_pos, f.page_table.empty() ? nullptr : &f.page_table,
                               at);
  Shape s = k.shape;
  s.insert(s.begin(), 2);
  TileTensor out = make_tile_tensor(s, k.format);
  std::copy(k.data.begin(), k.data.end(), out.data.begin());
  std::copy(v.data.begin(), v.data.end(), out.data.begin() + static_cast<std::ptrdiff_t>(k.data.size()));
  c.info["compute_kernel_config"] = {{"fp32_dest_acc_en", at.write.fp32_dest_acc_en}};
  c.info["attributes"] = fields::json_of(at);
  return out;
}

// paged-fill-cache's params: ttnn.experimental.paged_fill_cache's runtime
// arguments.
struct PagedFillCacheParams {
  std::optional<int64_t> batch_idx;
  std::vector<std::vector<int64_t>> page_table;
  template <class V>
  void fields(V& v) {
    const unsigned flag = fields::kRuntime | fields::kFlag;
    v("batch_idx", batch_idx, "the user, a page table row (--batch-idx), required", flag);
    v("page_table", page_table, "[b][blocks] block ids (--page-table FILE), required", flag);
  }
};

PagedFillCacheParams paged_fill_params(const nlohmann::ordered_json& p) {
  PagedFillCacheParams f;
  fields::parse_into(f, p, "op options", "paged-fill-cache option");
  if (!f.page_table.empty()) check_page_table(f.page_table);
  return f;
}

void check_paged_fill_cache(const OpCheck& c) {
  require_4d(c, "paged-fill-cache");
  const PagedFillCacheParams f = paged_fill_params(c.params);
  if (!f.batch_idx) throw InputError("paged-fill-cache: --batch-idx N (the batch_idx param) is required");
  if (f.page_table.empty()) throw InputError("paged-fill-cache: --page-table FILE (the page_table param) is required");
}

TileTensor run_paged_fill_cache_op(OpCall& c) {
  if (c.out_format != c.in[0].format)
    throw InputError("paged-fill-cache: the output is the cache, in its dtype; --output-dtype does not apply");
  const PagedFillCacheParams f = paged_fill_params(c.params);
  TileTensor cache = c.in[0];
  run_paged_fill_cache(c.dev, cache, c.in[1], f.page_table, *f.batch_idx);
  return cache;
}

}  // namespace

extern const TtOpDesc kOpPagedFillCache = {
    "paged-fill-cache", "CACHE X",
    "ttnn.experimental.paged_fill_cache: X [1, nkv, s, dh] copied tile by tile into user batch_idx's pages of CACHE "
    "[blocks, nkv, block_size, dh] through --page-table (same dtype); writes the updated cache",
    "a tile copy (no compute config)", 2, 2, false, false, op_params_of(PagedFillCacheParams{}),
    check_paged_fill_cache, nullptr, run_paged_fill_cache_op};

extern const TtOpDesc kOpPagedFusedUpdateCache = {
    "paged-fused-update-cache", "CACHE1 X1 CACHE2 X2",
    "ttnn.experimental.paged_fused_update_cache: X1 into CACHE1 and X2 into CACHE2 in one program, each as "
    "paged_update_cache writes it (--cur-pos P,... [--page-table FILE], X [1, b, nh, dh]); writes both caches "
    "stacked, [2, ...CACHE's shape]",
    "fp32 Dst off", 4, 4, false, false, op_params_of(FusedUpdateParams{}), check_fused_update, nullptr,
    run_fused_update_op};

extern const TtOpDesc kOpUpdateCache = {
    "update-cache", "CACHE X",
    "ttnn.update_cache (--update-idx N [--batch-offset B], X [1, nkv, users, dh]) or "
    "ttnn.experimental.paged_update_cache (--cur-pos P,... [--page-table FILE], X [1, b, nh, dh]): the row written "
    "through the packer in the cache's dtype, its 32-row tile re-packed; writes the updated cache",
    "fp32 Dst off", 2, 2, false, false, op_params_of(UpdateCacheParams{}), check_update_cache, nullptr,
    run_update_cache_op};

extern const TtOpDesc kOpFillCache = {
    "fill-cache", "CACHE X",
    "ttnn.fill_cache: X [1, nkv, s, dh] copied tile by tile into user batch_idx's rows update_idx.. of CACHE "
    "[b, nkv, S, dh] "
    "(same dtype); writes the updated cache",
    "a tile copy (no compute config)", 2, 2, false, false, op_params_of(FillCacheParams{}), check_fill_cache, nullptr,
    run_fill_cache_op};

}  // namespace mha::ttsim
