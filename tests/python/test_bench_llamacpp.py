"""scripts/bench_llamacpp.py's own logic, without npm or llama.cpp: its defaults are the rows
mha bench's llama.cpp comparison runs, and a llama-bench jsonl row becomes a row in mha bench's
keys with the median and range over the repetitions."""
import importlib.util
import json
import os

import pytest

SOURCE_DIR = os.environ.get("MHA_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
_spec = importlib.util.spec_from_file_location("bench_llamacpp", os.path.join(SOURCE_DIR, "scripts", "bench_llamacpp.py"))
bench_llamacpp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_llamacpp)

# One line llama-bench v0.5.0 printed for `-p 512 -n 0 -d 512 -t 2 -r 3 -fa 1 -ctk f32 -ctv f32`
# (trimmed to the keys the script reads, samples made up so that median and mean differ).
LLAMA_BENCH_LINE = json.dumps({
    "build_commit": "0ad4a86", "cpu_info": "Intel(R) Xeon(R) Processor", "n_batch": 512, "n_ubatch": 512,
    "n_threads": 2, "type_k": "f32", "type_v": "f32", "flash_attn": 1, "n_prompt": 512, "n_gen": 0,
    "n_depth": 512, "test_time": "2026-11-26T20:06:14Z", "avg_ts": 181.666667,
    "samples_ns": [2844444444, 2925714285, 2694736842], "samples_ts": [180.0, 175.0, 190.0]})


def test_defaults_are_the_rows_set_against_mha_bench():
    a = bench_llamacpp.parse_args([])
    assert (a.n_prompt, a.n_gen, a.n_depth, a.threads, a.repetitions) == ([512], [0], [8192, 32768], [1, 2], 3)
    assert (a.kv_cache, a.batch, a.hidden, a.heads, a.kv_heads, a.rope_theta) == (["f32"], 512, 4096, 32, 8, 500000.0)


def test_bad_flags_are_refused():
    for argv in (["--kv-cache", "q8_0"], ["-d", "8192,x"], ["-t", "-1"], ["-t", "0,2"], ["-r", "0"]):
        with pytest.raises(SystemExit) as e:
            bench_llamacpp.parse_args(argv)
        assert e.value.code == 2


def test_a_llama_bench_row_in_mha_bench_keys():
    a = bench_llamacpp.parse_args(["-d", "512", "-t", "2"])
    r = bench_llamacpp.row(json.loads(LLAMA_BENCH_LINE), a, "v0.5.0", "sapphirerapids", {"check": "ok", "flash_vs_plain_rel_l2": 3e-4})
    assert r["label"] == "llama.cpp v0.5.0 pp512 @ d512 t2"
    assert (r["test"], r["depth"], r["threads"], r["cache_dtype"], r["flash_attn"]) == ("pp512", 512, 2, "float32", True)
    assert (r["tokens_per_s"], r["tokens_per_s_median"], r["tokens_per_s_min"], r["tokens_per_s_max"]) == (181.667, 180.0, 175.0, 190.0)
    assert r["median_ms"] == pytest.approx(2844.444444)
    assert (r["ggml_cpu_variant"], r["llama_cpp_release"], r["llama_cpp_build"], r["logits_check"]) == (
        "sapphirerapids", "v0.5.0", "0ad4a86", "ok")


def test_the_loaded_cpu_variant_is_read_from_ggml_log():
    log = "warning: x\nload_backend: loaded CPU backend from /c/bins/libggml-cpu-zen4.so\nllama-bench: starting\n"
    assert bench_llamacpp.loaded_variant(log) == "zen4"
    assert bench_llamacpp.loaded_variant("llama-bench: starting\n") == "unknown"


def test_mha_rows_join_on_the_same_row(tmp_path):
    """--mha: mha's median tokens/s (tokens over its median run) beside llama.cpp's, and the ratio."""
    mha = {"test": "pp512", "depth": 512, "threads": 2, "cache_dtype": "float32", "hidden": 4096, "heads": 32,
           "kv_heads": 8, "batch": 1, "seq": 512, "build": "abc1234", "timing": {"median_ms": 1280.0}}
    other = dict(mha, threads=1, timing={"median_ms": 2560.0})
    skipped = {"test": "pp512", "depth": 512, "threads": 4, "cache_dtype": "float32", "hidden": 4096, "heads": 32,
               "kv_heads": 8, "skipped": "no memory"}
    f = tmp_path / "mha.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in (mha, other, skipped)) + "\n")
    rows = bench_llamacpp.mha_rows(f)
    assert len(rows) == 2
    a = bench_llamacpp.parse_args(["-d", "512", "-t", "2"])
    r = bench_llamacpp.row(json.loads(LLAMA_BENCH_LINE), a, "v0.5.0", "sapphirerapids", {"check": "ok", "flash_vs_plain_rel_l2": 3e-4})
    r = bench_llamacpp.with_mha(r, rows)
    assert (r["mha_tokens_per_s_median"], r["mha_over_llamacpp"], r["mha_build"]) == (400.0, round(400.0 / 180.0, 3), "abc1234")
    unmatched = bench_llamacpp.row(json.loads(LLAMA_BENCH_LINE), a, "v0.5.0", "sapphirerapids", {"check": "ok", "flash_vs_plain_rel_l2": 3e-4})
    unmatched["threads"] = 4  # mha skipped that row: nothing to set it against
    assert "mha_over_llamacpp" not in bench_llamacpp.with_mha(unmatched, rows)
