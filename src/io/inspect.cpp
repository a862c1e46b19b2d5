#include "io/inspect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/io_util.h"
#include "io/tensor_file.h"

namespace mha::io {

TensorStats tensor_stats(const std::string& name, const Tensor& t) {
  TensorStats s;
  s.name = name;
  s.dtype = t.dtype();
  s.shape = t.shape();
  s.numel = t.numel();
  // Neumaier summation: a plain running sum loses the mean of large tensors.
  double sum = 0, comp = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get_f64(i);
    if (std::isnan(v)) { ++s.nan_count; continue; }
    if (std::isinf(v)) { ++s.inf_count; continue; }
    if (s.finite == 0) s.min = s.max = v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    const double next = sum + v;
    comp += std::fabs(sum) >= std::fabs(v) ? (sum - next) + v : (v - next) + sum;
    sum = next;
    ++s.finite;
  }
  if (s.finite) s.mean = (sum + comp) / static_cast<double>(s.finite);
  return s;
}

std::vector<TensorStats> inspect_path(const std::string& path) {
  std::vector<TensorStats> out;
  std::error_code ec;
  const std::size_t colon = path.rfind(':');
  if (colon != std::string::npos && !std::filesystem::exists(path, ec)) {  // FILE:NAME, one tensor
    out.push_back(tensor_stats(path.substr(colon + 1), read_tensor(path)));
    return out;
  }
  for (const auto& [name, t] : read_all(path)) out.push_back(tensor_stats(name, t));
  return out;
}

namespace {

std::string num(double v, bool integral) {
  char buf[64];
  if (integral) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string format_stats_table(const std::vector<TensorStats>& stats) {
  std::vector<std::vector<std::string>> rows = {{"name", "dtype", "shape", "min", "max", "mean", "nan", "inf"}};
  for (const TensorStats& s : stats) {
    const bool integral = !dtype_is_float(s.dtype);
    const bool any = s.finite > 0;
    rows.push_back({detail::printable(s.name), dtype_name(s.dtype), shape_str(s.shape),
                    any ? num(s.min, integral) : "-", any ? num(s.max, integral) : "-",
                    any ? num(s.mean, false) : "-", std::to_string(s.nan_count), std::to_string(s.inf_count)});
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line.append(width[c] - r[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string format_stats_json(const std::string& path, const std::vector<TensorStats>& stats) {
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const TensorStats& s : stats) {
    nlohmann::ordered_json j;
    j["name"] = s.name;
    j["dtype"] = dtype_name(s.dtype);
    j["shape"] = s.shape;
    j["numel"] = s.numel;
    j["min"] = s.finite ? nlohmann::ordered_json(s.min) : nlohmann::ordered_json();
    j["max"] = s.finite ? nlohmann::ordered_json(s.max) : nlohmann::ordered_json();
    j["mean"] = s.finite ? nlohmann::ordered_json(s.mean) : nlohmann::ordered_json();
    j["nan_count"] = s.nan_count;
    j["inf_count"] = s.inf_count;
    tensors.push_back(std::move(j));
  }
  nlohmann::ordered_json doc = {{"file", path}, {"tensors", std::move(tensors)}};
  // Names and paths need not be UTF-8; replace bad bytes rather than fail.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace mha::io
