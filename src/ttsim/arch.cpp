#include "ttsim/arch.h"

namespace mha::ttsim {

const char* arch_name(Arch a) { return a == Arch::Blackhole ? "blackhole" : "wormhole"; }

}  // namespace mha::ttsim
