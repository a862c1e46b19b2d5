#pragma once
// Flag validators whose messages read "expected ..., found '...'", instead of
// CLI11's own range checks, which print their bounds to 300 digits.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace mha::cli {

// A number v with lo <= v <= hi.
inline CLI::Validator number_in(double lo, double hi, const std::string& what) {
  return CLI::Validator(
      [lo, hi, what](std::string& s) -> std::string {
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != '\0' || !(v >= lo && v <= hi)) return "expected " + what + ", found '" + s + "'";
        return "";
      },
      what);
}

// A whole number >= lo.
inline CLI::Validator integer_at_least(long long lo) {
  const std::string what = "an integer >= " + std::to_string(lo);
  return CLI::Validator(
      [lo, what](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(s.c_str(), &end, 10);
        if (end == s.c_str() || *end != '\0' || errno == ERANGE || v < lo) return "expected " + what + ", found '" + s + "'";
        return "";
      },
      what);
}

}  // namespace mha::cli
