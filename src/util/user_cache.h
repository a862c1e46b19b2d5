#pragma once
// A small JSON store under the user's cache folder for what mha measures
// about the machine and wants to reuse across runs: `mha bench`'s probes
// (sgemm, bandwidth, FMA peak) and the cpu decode kernel's calibration.
// Entries are grouped by kind ("probes", "decode_calibration") and keyed by
// a string the caller builds (CPU model, ISA, thread count, build), so one
// file serves every kind and a new kind needs no new file.
//
// The folder is $MHA_CACHE_DIR, else $XDG_CACHE_HOME/mha, else
// $HOME/.cache/mha. Tests point MHA_CACHE_DIR at a temporary folder so they
// never read or write the user's. The store is an optimisation, never an
// input: a missing, unreadable or garbled file reads as empty (one warning
// line for a garbled one), and a failed write only warns. Writes go to a
// temporary beside the file and are renamed into place, so a reader never
// sees half a file and two processes at worst lose one entry.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace mha {

// The store's file: "<folder>/store.json" (the folder need not exist yet).
std::string user_cache_path();

// The entry stored under kind/key, or nothing.
std::optional<nlohmann::json> user_cache_get(const std::string& kind, const std::string& key);

// Stores `value` under kind/key, replacing any earlier entry; creates the
// folder. Returns false (after one warning on stderr) when it cannot write.
bool user_cache_put(const std::string& kind, const std::string& key, const nlohmann::json& value);

}  // namespace mha
