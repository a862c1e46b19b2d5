#pragma once
// A Hugging Face model folder as the model: DIR/config.json and its
// safetensors (DIR/model.safetensors, or DIR/model.safetensors.index.json
// with its shards; the Hugging Face cache's symlinks followed). One layer's
// attention becomes variant llama_attention (mla_attention for DeepSeek-V3's
// layout) with params taken from the
// config under their own names (variants/hf_families.h) plus layer_idx, and
// weights picked from the checkpoint by the layer's tensor prefix.
//
// config.json: `model_type` picks the family; a multimodal config (Gemma 3)
// holds the text model's under `text_config`, whose model_type may be
// omitted, and its tensors sit beside a vision tower's (which is skipped).
// Keys that change attention and that mha does not run (other MLA layouts, chunked
// attention, rope_parameters, ...) are refused naming the key; keys of the
// rest of the model (vocabulary, MLP, experts...) are not read.
#include <cstdint>
#include <string>
#include <vector>

#include "util/json_util.h"
#include "variants/hf_families.h"

namespace mha {

struct HfModel {
  std::string dir;
  std::string weights;      // the safetensors file or index mha reads
  std::string model_type;   // the text model's, as written (or implied)
  HfFamily family = HfFamily::Llama;
  int64_t num_layers = 0;   // num_hidden_layers
  // DeepSeek-V3's multi-token-prediction layers (num_nextn_predict_layers),
  // stored as layers num_layers .. num_layers + mtp_layers - 1 with the same attention.
  int64_t mtp_layers = 0;
  // The config.json keys the attention reads (hf_attention_keys), with
  // model_type, without layer_idx: a layer's params add it.
  ordered_json attention_params = ordered_json::object();
  std::vector<std::string> unread_keys;  // config keys mha does not read (not attention)
};

// Reads DIR/config.json and finds the weights file; InputError (one line,
// naming the folder and the key) for a folder that is not a supported model.
HfModel open_hf_model(const std::string& dir);

// Layer `layer`'s params (attention_params + layer_idx), checked.
ordered_json hf_layer_params(const HfModel& m, int64_t layer);

// The prefix of layer `layer`'s attention tensors in the checkpoint
// ("model.layers.3.self_attn.", "language_model.model.layers.3.self_attn."),
// found among `names` (a vision tower's layers are not the text model's).
std::string hf_layer_prefix(const HfModel& m, const std::vector<std::string>& names, int64_t layer);

}  // namespace mha
