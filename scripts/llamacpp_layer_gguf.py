#!/usr/bin/python3
"""Write a GGUF of ONE Llama layer for llama.cpp, so llama-bench times the layer mha bench times.

The shape is mha bench's llama_attention row (default: Llama-3-8B, hidden 4096, 32 query heads
over 8 KV heads, head dim 128, RoPE theta 500000). llama.cpp has no attention-only model, so
the layer also carries an FFN and the model an embedding and an output head: they are made as
small as they go (n_ff 1, a 32-token vocab with no tokenizer, the output head tied to
the embedding), which leaves the timed work the attention layer with its four projections plus
two RMS norms, an FFN of width 1 (0.03 % of the projections' FLOPs) and 32 logits per batch.

Weights are random (normal, 1/sqrt(fan_in)), seed fixed: the timed work does not depend on them.
The writer is gguf-py from the llama.cpp release under test (pass its folder as --gguf-py), so
the keys and layout are the ones that release reads.
"""
import argparse
import sys

import numpy as np


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    ap.add_argument("-o", "--output", required=True, help="GGUF file to write")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--rope-theta", type=float, default=500000.0)
    ap.add_argument("--n-ff", type=int, default=1, help="FFN width (tiny: the bench times attention)")
    ap.add_argument("--vocab", type=int, default=32)
    ap.add_argument("--context", type=int, default=131072, help="n_ctx_train")
    ap.add_argument("--weights", choices=["f32", "f16"], default="f32",
                    help="projection weight type (mha's cpu backend holds float32)")
    a = ap.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads:
        ap.error(f"--hidden {a.hidden} / --heads {a.heads} / --kv-heads {a.kv_heads}: "
                 "expected hidden divisible by heads and heads by kv-heads")
    return a


def tensors(a, rng):
    """Name -> array in numpy order (out, in): gguf-py reverses it into ggml's ne order."""
    dh = a.hidden // a.heads
    kv = a.kv_heads * dh
    wdt = np.float32 if a.weights == "f32" else np.float16

    def w(out, inp):
        return (rng.standard_normal((out, inp), dtype=np.float32) / np.sqrt(inp)).astype(wdt)

    ones = np.ones(a.hidden, dtype=np.float32)  # norms stay float32, as converted models keep them
    return {
        # std 0.02 (Hugging Face's initializer_range) keeps the embedding below the attention's
        # output in the residual, so the logits the check compares depend on the attention.
        "token_embd.weight": 0.02 * rng.standard_normal((a.vocab, a.hidden), dtype=np.float32),
        "output_norm.weight": ones,
        "blk.0.attn_norm.weight": ones,
        "blk.0.attn_q.weight": w(a.hidden, a.hidden),
        "blk.0.attn_k.weight": w(kv, a.hidden),
        "blk.0.attn_v.weight": w(kv, a.hidden),
        "blk.0.attn_output.weight": w(a.hidden, a.hidden),
        "blk.0.ffn_norm.weight": ones,
        "blk.0.ffn_gate.weight": w(a.n_ff, a.hidden),
        "blk.0.ffn_up.weight": w(a.n_ff, a.hidden),
        "blk.0.ffn_down.weight": w(a.hidden, a.n_ff),
    }


def main(argv):
    a = parse_args(argv)
    sys.path.insert(0, a.gguf_py)
    import gguf  # the release's own writer, found through --gguf-py

    wr = gguf.GGUFWriter(a.output, "llama")
    wr.add_name(f"mha-bench llama layer {a.hidden}/{a.heads}:{a.kv_heads} ff{a.n_ff}")
    wr.add_file_type(gguf.LlamaFileType.ALL_F32 if a.weights == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    wr.add_context_length(a.context)
    wr.add_embedding_length(a.hidden)
    wr.add_feed_forward_length(a.n_ff)
    wr.add_block_count(1)
    wr.add_head_count(a.heads)
    wr.add_head_count_kv(a.kv_heads)
    wr.add_rope_dimension_count(a.hidden // a.heads)
    wr.add_rope_freq_base(a.rope_theta)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(a.vocab)
    wr.add_tokenizer_model("none")  # llama.cpp then makes vocab_size dummy tokens, no BOS
    for name, t in tensors(a, np.random.default_rng(0)).items():
        wr.add_tensor(name, t)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


if __name__ == "__main__":
    main(sys.argv[1:])
