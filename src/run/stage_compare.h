#pragma once
// `mha run --compare-stages` as a library: every stage a backend collected,
// compared with the cpu backend's stage of the same name on the same spec
// and inputs (as TT-NN's comparison mode checks op by op).
//
// Masked positions compare as masked. Backends mask differently: the cpu
// backend writes -inf, tt-sim adds -1e9 as the seeds' TT-NN code does, so a
// plain PCC over masked_scores mixes -1e9 with -inf and means nothing. The
// positions the run masks are known from the mask itself (the spec's causal
// / window mask and -inf entries of the additive mask); they are left out of
// PCC and errors, counted, and each is checked to be masked on the backend
// too: -inf, or low enough that a float32 softmax of its row gives it no
// weight (see masked_in_row).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compare/compare.h"
#include "model/attention.h"

namespace mha {

struct StageComparison {
  std::string stage;
  Shape shape;
  // Unset when the cpu backend has no stage of that name and shape.
  std::optional<compare::Report> report;
  // Positions the mask masks (left out of report), and how many of them the
  // backend did not mask (or the cpu reference did not: not -inf).
  int64_t masked = 0, masked_disagree = 0;
};

// [B, H, L, S_total] flags (row-major, 1 = masked) of the positions the
// run's mask masks: the spec's causal and window masks and the -inf entries
// of inputs.mask (broadcast as the backends broadcast it).
std::vector<uint8_t> masked_positions(const AttentionSpec& spec, const AttentionInputs& inputs, const Shape& scores);

// A masked value counts as masked when it is -inf or when exp(value - m),
// m the largest unmasked value of its row, is 0 in float32 (value - m below
// -104, under half the smallest denormal): a softmax gives it no weight.
bool masked_in_row(double value, double row_max_unmasked);

// Compares `stages` (one backend's) with the cpu backend's run of `spec` on
// `inputs`; masked_scores compares as masked (above).
std::vector<StageComparison> compare_stages(const AttentionSpec& spec, const AttentionInputs& inputs,
                                            const NamedTensors& stages);

// The text table (one line per stage) and the JSON array
// [{stage, shape, pcc, max_abs_diff, masked, masked_disagree}].
std::string format_stage_comparison(const std::vector<StageComparison>& c);
nlohmann::json stage_comparison_json(const std::vector<StageComparison>& c);

}  // namespace mha
