#pragma once
// `mha op sdpa` / `sdpa-decode` split by heads (src/parallel/op_heads.h
// runs the shares on MPI ranks), as TT-NN shards an attention's heads
// across the devices of a mesh. A share is whole key/value groups: query
// heads [p*H/N, (p+1)*H/N) and key/value heads [p*Hkv/N, (p+1)*Hkv/N) of Q,
// K, V, the mask's rows of those heads (a mask broadcast over heads is kept
// whole) and their attention_sink entries. Every head's attention reads only
// its own group, so the shares' outputs side by side are one op's bits:
//   sdpa          Q [b, nh, s, dh], K/V [b, nkv, S, d], MASK [b, 1|nh, s, S]
//                 -> [b, nh, s, dv]        heads on axis 1
//   sdpa-decode   Q [1, b, nh, dh], K/V [b|blocks, nkv, S, d], MASK [b, 1, nh, S]
//                 -> [1, b, nh, dv]        heads on axis 2
// Decode deals a head's K/V chunks to `cores_per_head` cores and merges them
// on a tree whose shape sets the bits; a share keeps the whole op's count
// (max_cores_per_head_batch pinned to it), where a device of the mesh would
// spread fewer heads over its whole grid.
#include <string>
#include <vector>

#include "backends/ttsim/ttsim_single_op.h"

namespace mha::ttsim {

// True for the ops above.
bool op_splits_heads(const std::string& op);

// Share `part` of `parts` of `req`; InputError (one line) when the op does
// not split or its heads do not split into `parts` shares of whole groups.
OpRequest op_heads_share(const OpRequest& req, int64_t part, int64_t parts);

// The shares' outputs (float32, in share order) side by side on the op's
// head axis: the whole op's output.
Tensor join_op_heads(const std::string& op, const std::vector<Tensor>& outputs);

}  // namespace mha::ttsim
