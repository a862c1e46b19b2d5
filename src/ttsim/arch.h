#pragma once
// Which Tensix generation's arithmetic tt-sim emulates. The generations
// share the algorithms (the LLK) but not every datapath: Blackhole's SFPU
// multiply-add keeps full sticky bits, signed zeros and a canonical NaN,
// its SFPU has SFPARECIP (a table-seeded reciprocal), and its matrix unit
// normalises a sum of -1 ulp correctly where Wormhole's leading-sign
// counter misreads it (docs/TTSIM.md, "Blackhole"). Passed down as a value,
// never derived from a device name below the backend.
#include <utility>
#include <vector>

namespace mha::ttsim {

enum class Arch { Wormhole, Blackhole };

// "wormhole" or "blackhole" (what --json reports).
const char* arch_name(Arch a);
// {name, value} list for util/fields.h (ComputeConfig's derived "arch").
const std::vector<std::pair<const char*, Arch>>& field_choices(Arch*);

}  // namespace mha::ttsim
