#include "ttsim/revision.h"

#include "util/error.h"

namespace mha::ttsim {

const char* tt_metal_name(TtMetal t) { return t == TtMetal::Latest ? "latest" : "2024"; }

const char* tt_metal_commit(TtMetal t) {
  return t == TtMetal::Latest ? "15a15bf5aa65e876561158b66c7d55b8b915e341" : "0255f50ff85d45d225ef4a20a7d09fc34320824b";
}

const std::vector<std::pair<const char*, TtMetal>>& field_choices(TtMetal*) {
  static const std::vector<std::pair<const char*, TtMetal>> c = {{"2024", TtMetal::R2024},
                                                                   {"latest", TtMetal::Latest}};
  return c;
}

void refuse_unmodelled(const std::string& op, const std::string& what, TtMetal t) {
  throw InputError(op + ": " + what + " is not modelled at tt_metal " + tt_metal_name(t) +
                   "; run it with tt_metal=2024");
}

}  // namespace mha::ttsim
