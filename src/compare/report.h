#pragma once
// Presenting a comparison: the text report for people and the JSON document
// for machines (its schema is in docs/COMPARE.md).
#include <nlohmann/json.hpp>
#include <string>

#include "compare/compare.h"

namespace mha::compare {

// Metric as printed: 6 decimals between 1e-3 and 1e6 (as seed 000 prints),
// scientific notation outside, "nan" / "inf" / "-inf" when not finite.
std::string format_metric(double v);

// Multi-line text report ending with a PASS / FAIL line.
std::string format_text(const Report& report);

// Every metric; non-finite numbers become the strings "nan", "inf", "-inf"
// since JSON has no literal for them.
nlohmann::json to_json(const Report& report);

}  // namespace mha::compare
