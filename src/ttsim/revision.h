#pragma once
// Whose tt-metal program factories and compute kernels an op emulates: a
// named profile, carried in every op's compute config (so it keys every
// program) like the Arch. "2024" is the revision the emulation first
// followed (SDPA's compute kernel at 0255f50, softmax's 1/ln2-seeded
// reciprocal); "latest" the newest revision whose factory, kernels and LLK
// are all readable (docs/TTSIM.md, "tt-metal revisions"). An op whose
// kernel did not change between the two runs one implementation for both;
// one that is not modelled at a profile refuses it (refuse_unmodelled).
#include <string>
#include <utility>
#include <vector>

namespace mha::ttsim {

enum class TtMetal { R2024, Latest };

// The default profile, the one place it is set: today's kernels, which is
// what users run. Whatever latest does not model yet refuses in one line
// naming tt_metal=2024 (refuse_unmodelled), never runs 2024 silently.
constexpr TtMetal kDefaultTtMetal = TtMetal::Latest;

// "2024" or "latest" (what --json reports as tt_metal.profile).
const char* tt_metal_name(TtMetal t);
// The tt-metal commit the profile's SDPA kernels were read at (the other
// files' commits are listed in docs/TTSIM.md).
const char* tt_metal_commit(TtMetal t);
// {name, value} list for util/fields.h.
const std::vector<std::pair<const char*, TtMetal>>& field_choices(TtMetal*);

// Throws InputError "OP: WHAT is not modelled at tt_metal latest; run it with
// tt_metal=2024" (exit 2): an op never runs another profile silently.
[[noreturn]] void refuse_unmodelled(const std::string& op, const std::string& what, TtMetal t);

}  // namespace mha::ttsim
