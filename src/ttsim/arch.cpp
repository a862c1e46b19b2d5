#include "ttsim/arch.h"

namespace mha::ttsim {

const char* arch_name(Arch a) { return a == Arch::Blackhole ? "blackhole" : "wormhole"; }

const std::vector<std::pair<const char*, Arch>>& field_choices(Arch*) {
  static const std::vector<std::pair<const char*, Arch>> c = {{"wormhole", Arch::Wormhole},
                                                              {"blackhole", Arch::Blackhole}};
  return c;
}

}  // namespace mha::ttsim
