#include "tensor/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <vector>

namespace mha {

namespace {

constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdge = 3;
constexpr int kLineWidth = 80;

std::string printf_str(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string nonfinite(double v) { return std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf"); }

// torch's _Formatter: one width and one style for the whole tensor, chosen
// from the nonzero finite values it will print.
class Formatter {
 public:
  Formatter(const std::vector<double>& vals, bool floating, bool is_bool) : is_bool_(is_bool), floating_(floating) {
    std::vector<double> nz;
    for (double v : vals) {
      if (!floating) {
        width_ = std::max<int>(width_, static_cast<int>(int_str(v).size()));
      } else if (std::isfinite(v) && v != 0.0) {
        nz.push_back(v);
      }
    }
    if (!floating || nz.empty()) return;
    double mn = INFINITY, mx = 0;
    for (double v : nz) {
      mn = std::min(mn, std::fabs(v));
      mx = std::max(mx, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      sci_ = mx / mn > 1000.0 || mx > 1e8;
    } else {
      sci_ = mx / mn > 1000.0 || mx > 1e8 || mn < 1e-4;
    }
    for (double v : nz) {
      std::string s = sci_ ? printf_str("%.4e", v) : int_mode_ ? printf_str("%.0f", v) + "." : printf_str("%.4f", v);
      width_ = std::max<int>(width_, static_cast<int>(s.size()));
    }
  }
  int width() const { return width_; }
  std::string format(double v) const {
    std::string s;
    if (!floating_) s = int_str(v);
    else if (!std::isfinite(v)) s = nonfinite(v);
    else if (sci_) s = printf_str("%.4e", v);
    else if (int_mode_) s = printf_str("%.0f", v) + ".";
    else s = printf_str("%.4f", v);
    if (static_cast<int>(s.size()) < width_) s = std::string(width_ - s.size(), ' ') + s;
    return s;
  }

 private:
  std::string int_str(double v) const {
    if (is_bool_) return v != 0 ? "True" : "False";
    return printf_str("%.0f", v);
  }

  bool is_bool_;
  bool floating_;
  bool int_mode_ = true;
  bool sci_ = false;
  int width_ = 1;
};

// Elements are read one by one from the tensor: a summarised print shows a
// few hundred of them, and a float64 copy of the whole tensor would double
// a large output's memory (1 GB more for a 131072x1024 float32 output).
using Getter = std::function<double(int64_t)>;  // flat index -> element
struct View {
  const Getter* t;
  const Shape* shape;
  int64_t offset;  // flat index of this sub-tensor's first element
  int dim;         // which dim of `shape` this view starts at
  int64_t stride() const {
    int64_t s = 1;
    for (std::size_t d = dim + 1; d < shape->size(); ++d) s *= (*shape)[d];
    return s;
  }
  View sub(int64_t i) const { return {t, shape, offset + i * stride(), dim + 1}; }
  double at(int64_t i) const { return (*t)(offset + i); }
  int64_t size() const { return (*shape)[dim]; }
  int rank() const { return static_cast<int>(shape->size()) - dim; }
};

// The elements a summarised print shows (torch's get_summarized_data).
void summarized(const View& v, bool summarize, std::vector<double>& out) {
  if (v.rank() == 0) {
    out.push_back(v.at(0));
    return;
  }
  int64_t n = v.size();
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdge && i == kEdge) i = n - kEdge;
    summarized(v.sub(i), summarize, out);
  }
}

std::string vector_str(const View& v, int indent, bool summarize, const Formatter& f) {
  int per_line = std::max(1, (kLineWidth - indent) / (f.width() + 2));
  std::vector<std::string> data;
  int64_t n = v.size();
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdge && i == kEdge) {
      data.push_back(" ...");
      i = n - kEdge;
    }
    data.push_back(f.format(v.at(i)));
  }
  std::string s = "[";
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (i) s += (i % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
    s += data[i];
  }
  return s + "]";
}

std::string tensor_str(const View& v, int indent, bool summarize, const Formatter& f) {
  if (v.rank() == 0) return f.format(v.at(0));
  if (v.rank() == 1) return vector_str(v, indent, summarize, f);
  std::vector<std::string> slices;
  int64_t n = v.size();
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdge && i == kEdge) {
      slices.push_back("...");
      i = n - kEdge;
    }
    slices.push_back(tensor_str(v.sub(i), indent + 1, summarize, f));
  }
  std::string sep = "," + std::string(v.rank() - 1, '\n') + std::string(indent + 1, ' ');
  std::string s = "[";
  for (std::size_t i = 0; i < slices.size(); ++i) s += (i ? sep : "") + slices[i];
  return s + "]";
}

// The print of elements `get` gives of a tensor of `shape` and `dtype`.
std::string format_elements(const Getter& get, const Shape& shape, DType dtype, int64_t numel) {
  std::string suffix;
  if (dtype != DType::F32 && dtype != DType::I64 && dtype != DType::Bool)
    suffix = std::string(", dtype=torch.") + dtype_name(dtype);
  if (numel == 0) {
    std::string s = "tensor([]";
    if (shape.size() != 1) s += ", size=" + shape_str(shape);
    return s + suffix + ")";
  }
  bool summarize = numel > kThreshold;
  View root{&get, &shape, 0, 0};
  std::vector<double> shown;
  summarized(root, summarize, shown);
  Formatter f(shown, dtype_is_float(dtype), dtype == DType::Bool);
  return "tensor(" + tensor_str(root, 7, summarize, f) + suffix + ")";
}

}  // namespace

std::string format_torch(const Tensor& t) {
  const Getter get = [&t](int64_t i) { return t.get_f64(i); };
  return format_elements(get, t.shape(), t.dtype(), t.numel());
}

std::string format_torch_rows(const Tensor& rows, const std::vector<int64_t>& rows_index, const Shape& shape) {
  const int64_t numel = shape_numel(shape), L = shape.at(1), inner = numel / std::max<int64_t>(shape.at(0) * L, 1);
  const int64_t K = static_cast<int64_t>(rows_index.size());
  const Getter get = [&](int64_t i) {
    const int64_t b = i / (L * inner), l = i / inner % L, e = i % inner;
    const auto it = std::lower_bound(rows_index.begin(), rows_index.end(), l);
    if (it == rows_index.end() || *it != l) throw std::logic_error("format_torch_rows: row " + std::to_string(l) + " not held");
    return rows.get_f64((b * K + (it - rows_index.begin())) * inner + e);
  };
  return format_elements(get, shape, rows.dtype(), numel);
}

}  // namespace mha
