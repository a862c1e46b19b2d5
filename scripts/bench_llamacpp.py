#!/usr/bin/python3
"""llama.cpp's prebuilt CPU build on the rows `mha bench -p 512 -d ... -t ...` times, as jsonl.

    /usr/bin/python3 scripts/bench_llamacpp.py                  # pp512 @ d8192,32768, t 1,2, r 3
    /usr/bin/python3 scripts/bench_llamacpp.py -d 512 -t 2 -r 2 # a quick end-to-end check

The side to set it against:
    ./build/mha bench --no-progress --hidden 4096 --heads 32 --kv-heads 8 -n 0 -p 512 \\
        -d 8192,32768 -t 1,2 -r 3 --warmup 0 -o jsonl

What it does, all under a cache folder outside the repo (--cache; nothing is committed):
1. `npm pack`s node-llama-cpp's prebuilt CPU build `@node-llama-cpp/linux-x64` (libllama,
   libggml-base, one libggml-cpu-<variant>.so per x86 level) and `node-llama-cpp` itself, which
   ships the source of the same llama.cpp release as a git bundle; refuses if the two name
   different releases.
2. Builds that release's own llama-bench (tools/llama-bench) against the prebuilt libraries,
   with one change: its -ctk/-ctv parser also takes `f32` (llama.cpp takes a float32 cache; the
   tool's parser lists only f16, bf16 and the quantized types). Builds scripts/llamacpp_check.cpp
   beside it.
3. Writes a GGUF of one Llama layer of mha's shape (scripts/llamacpp_layer_gguf.py: random
   weights, an FFN of width 1, a 32-token vocab).
4. Runs llamacpp_check (finite logits; flash attention against plain attention) and stops if
   it fails, then llama-bench: -fa 1, -ctk/-ctv as --kv-cache, -b 512 -ub 512, its own warmup,
   -r reps; every rep clears the cache, refills the depth (untimed; llama-bench restores its
   saved state after the first fill) and times -p tokens.
Each llama-bench row becomes one jsonl line keyed like mha's (test, depth, threads,
cache_dtype, tokens_per_s) plus median/min/max over the reps, the ggml CPU variant ggml loaded,
and the llama.cpp release; with --mha FILE (mha bench's jsonl) also mha's median tokens/s for
the same row and mha's over llama.cpp's.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

NODE_LLAMA_CPP = "3.22.1"
SCRIPTS = Path(__file__).resolve().parent
CACHE_DTYPES = {"f32": "float32", "f16": "float16"}
SOURCE_PARTS = ("include", "ggml/include", "common", "vendor", "tools/llama-bench", "gguf-py")


def fail(msg, code=1):
    """One line on stderr and exit: 2 for bad input (as argparse and mha), 1 for a failed step."""
    print(f"bench_llamacpp: error: {msg}", file=sys.stderr)
    sys.exit(code)


def int_list(s):
    try:
        vals = [int(v) for v in s.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}': expected a comma list of integers")
    if any(v < 0 for v in vals):
        raise argparse.ArgumentTypeError(f"'{s}': expected integers >= 0")
    return vals


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", "--n-prompt", type=int_list, default=[512], help="prompt sizes (pp rows)")
    ap.add_argument("-n", "--n-gen", type=int_list, default=[0], help="generated tokens (tg rows; 0: none)")
    ap.add_argument("-d", "--n-depth", type=int_list, default=[8192, 32768], help="depths")
    ap.add_argument("-t", "--threads", type=int_list, default=[1, 2], help="thread counts")
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--kv-cache", default="f32", help="K and V cache types, comma list of f32, f16")
    ap.add_argument("--batch", type=int, default=512, help="llama-bench -b and -ub (its defaults: 2048, 512)")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--rope-theta", type=float, default=500000.0)
    ap.add_argument("--n-ff", type=int, default=1, help="FFN width (tiny: the bench times attention)")
    ap.add_argument("--weights", choices=["f32", "f16"], default="f32")
    ap.add_argument("--check-depth", type=int, default=512, help="depth the logits check runs at")
    ap.add_argument("--version", default=NODE_LLAMA_CPP, help="node-llama-cpp version (names the llama.cpp release)")
    ap.add_argument("--cache", type=Path, default=default_cache(), help="where packages, builds and the GGUF go")
    ap.add_argument("--progress", action="store_true", help="llama-bench's progress lines on stderr")
    ap.add_argument("--mha", type=Path, help="mha bench -o jsonl rows: each row gains mha's median and the ratio")
    a = ap.parse_args(argv)
    if 0 in a.threads or a.repetitions < 1:
        ap.error("-t and -r: expected at least 1")
    a.kv_cache = a.kv_cache.split(",")
    bad = [t for t in a.kv_cache if t not in CACHE_DTYPES]
    if bad:
        ap.error(f"--kv-cache {bad[0]}: expected one of {', '.join(CACHE_DTYPES)}")
    return a


def default_cache():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.environ.get("MHA_LLAMACPP_CACHE") or os.path.join(base, "mha", "llamacpp"))


def run(cmd, check=True, **kw):
    try:
        return subprocess.run(cmd, check=check, text=True, **kw)
    except FileNotFoundError:
        fail(f"'{cmd[0]}' not found (npm, tar, git and g++ fetch and build llama.cpp)")
    except subprocess.CalledProcessError as e:
        fail(f"'{' '.join(map(str, cmd))}' exited {e.returncode}")


def npm_package(spec, dest):
    """The unpacked npm tarball of spec under dest (fetched once; a half-done fetch never counts)."""
    if (dest / "package.json").exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        out = run(["npm", "pack", spec, "--silent", "--pack-destination", tmp], stdout=subprocess.PIPE)
        tgz = Path(tmp) / out.stdout.strip().splitlines()[-1]
        run(["tar", "xzf", str(tgz), "-C", tmp])
        os.replace(Path(tmp) / "package", dest)
    return dest


def fetch(root, version):
    """(prebuilt bin dir, llama.cpp source tree, release) for node-llama-cpp `version`."""
    pre = npm_package(f"@node-llama-cpp/linux-x64@{version}", root / "linux-x64")
    main = npm_package(f"node-llama-cpp@{version}", root / "node-llama-cpp")
    bins = pre / "bins" / "linux-x64"
    release = json.loads((bins / "_nlcBuildMetadata.json").read_text())["buildOptions"]["llamaCpp"]["release"]
    source_tag = json.loads((main / "llama" / "llama.cpp.info.json").read_text())["tag"]
    if source_tag != release:
        fail(f"node-llama-cpp {version}: prebuilt build is llama.cpp {release}, its source bundle {source_tag}")
    src = root / "llama.cpp"
    if not (src / "include" / "llama.h").exists():
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            # only the parts the build and the GGUF writer read
            run(["git", "clone", "--quiet", "--no-checkout", str(main / "llama" / "gitRelease.bundle"), f"{tmp}/src"])
            run(["git", "-C", f"{tmp}/src", "checkout", "--quiet", "HEAD", "--", *SOURCE_PARTS])
            os.replace(f"{tmp}/src", src)
    return bins, src, release


def shared_libs(bins):
    names = sorted(p.name for p in bins.glob("lib*.so") if not p.name.startswith("libggml-cpu-"))
    return [f"-l:{n}" for n in names if n != "libllama-common.so"]


def compile_cpp(sources, out, src, bins, extra_libs=()):
    inc = [f"-I{src / d}" for d in SOURCE_PARTS[:-1]]
    cmd = ["g++", "-std=c++17", "-O2", "-DNDEBUG", *inc, *map(str, sources), "-o", str(out) + ".tmp",
           f"-L{bins}", *extra_libs, *shared_libs(bins), "-Wl,-rpath,$ORIGIN", "-pthread"]
    run(cmd)
    os.replace(str(out) + ".tmp", out)


def build(bins, src, root):
    """llama-bench (taking f32 for -ctk/-ctv) and llamacpp_check, next to the libggml-cpu-*.so
    files: ggml looks for its CPU variants in the executable's folder."""
    bench = bins / "llama-bench"
    if not bench.exists():
        text = (src / "tools/llama-bench/llama-bench.cpp").read_text()
        head = "static ggml_type ggml_type_from_name(const std::string & s) {\n"
        if text.count(head) != 1:
            fail(f"{src}/tools/llama-bench/llama-bench.cpp: cannot find '{head.strip()}' to add f32")
        patched = root / "llama-bench-f32.cpp"
        patched.write_text(text.replace(head, head + '    if (s == "f32") {\n        return GGML_TYPE_F32;\n    }\n'))
        compile_cpp([patched, src / "tools/llama-bench/main.cpp"], bench, src, bins, ["-l:libllama-common.so"])
    check, check_src = bins / "llamacpp_check", SCRIPTS / "llamacpp_check.cpp"
    if not check.exists() or check.stat().st_mtime < check_src.stat().st_mtime:
        compile_cpp([check_src], check, src, bins)
    return bench, check


def model(a, src, root):
    name = f"llama-layer-{a.hidden}-{a.heads}-{a.kv_heads}-ff{a.n_ff}-{a.weights}-theta{a.rope_theta:g}.gguf"
    path = root / "models" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        run([sys.executable, str(SCRIPTS / "llamacpp_layer_gguf.py"), "--gguf-py", str(src / "gguf-py"),
             "-o", str(tmp), "--hidden", str(a.hidden), "--heads", str(a.heads), "--kv-heads", str(a.kv_heads),
             "--rope-theta", str(a.rope_theta), "--n-ff", str(a.n_ff), "--weights", a.weights])
        os.replace(tmp, path)
    return path


def logits_check(check, gguf, a):
    out = run([str(check), str(gguf), str(a.check_depth), str(max(a.threads))], check=False, stdout=subprocess.PIPE)
    if not out.stdout.strip():
        fail(f"{check} exited {out.returncode} without a result")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"bench_llamacpp: logits check: {json.dumps(result)}", file=sys.stderr)
    return result


def loaded_variant(stderr_text):
    m = re.search(r"loaded CPU backend from \S*libggml-cpu-([\w-]+)\.so", stderr_text)
    return m.group(1) if m else "unknown"


def row(lb, a, release, variant, check):
    """One llama-bench jsonl row in mha bench's keys, with median and range over the reps."""
    ts = lb["samples_ts"]
    test = f"pp{lb['n_prompt']}" if lb["n_gen"] == 0 else f"tg{lb['n_gen']}"
    if lb["n_prompt"] and lb["n_gen"]:
        test = f"pp{lb['n_prompt']}+tg{lb['n_gen']}"
    return {
        "tool": "llama.cpp", "label": f"llama.cpp {release} {test} @ d{lb['n_depth']} t{lb['n_threads']}",
        "test": test, "depth": lb["n_depth"], "threads": lb["n_threads"],
        "cache_dtype": CACHE_DTYPES[lb["type_k"]], "flash_attn": lb["flash_attn"] == 1,
        "hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads, "n_ff": a.n_ff, "weights": a.weights,
        "n_batch": lb["n_batch"], "n_ubatch": lb["n_ubatch"], "reps": len(ts),
        "tokens_per_s": round(lb["avg_ts"], 3), "tokens_per_s_median": round(statistics.median(ts), 3),
        "tokens_per_s_min": min(ts), "tokens_per_s_max": max(ts), "samples_ts": ts,
        "median_ms": round(statistics.median(lb["samples_ns"]) / 1e6, 3),
        "ggml_cpu_variant": variant, "ggml_cpu_features": check.get("system_info", ""), "llama_cpp_release": release, "llama_cpp_build": lb["build_commit"],
        "node_llama_cpp": a.version, "cpu": lb["cpu_info"], "timestamp": lb["test_time"],
        "logits_check": check["check"], "logits_check_rel_l2": check["flash_vs_plain_rel_l2"],
    }


def mha_rows(path):
    """mha bench jsonl rows by (test, depth, threads, cache_dtype, hidden, heads, kv_heads)."""
    if path is None:
        return {}
    if not path.is_file():
        fail(f"--mha {path}: no such file (expected mha bench -o jsonl output)", 2)
    rows = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            fail(f"{path}:{n}: expected one mha bench jsonl row per line", 2)
        if "timing" in r:  # skipped rows have none
            rows[(r["test"], r["depth"], r["threads"], r.get("cache_dtype"), r["hidden"], r["heads"], r["kv_heads"])] = r
    return rows


def with_mha(out, mha):
    """out with mha's median tokens/s for the same row and mha's over llama.cpp's, when mha has it."""
    m = mha.get((out["test"], out["depth"], out["threads"], out["cache_dtype"], out["hidden"], out["heads"], out["kv_heads"]))
    if m:
        out["mha_tokens_per_s_median"] = round(m["batch"] * m["seq"] / (m["timing"]["median_ms"] / 1e3), 3)
        out["mha_over_llamacpp"] = round(out["mha_tokens_per_s_median"] / out["tokens_per_s_median"], 3)
        out["mha_build"] = m.get("build")
    return out


def bench(bench_bin, gguf, a, release, check, kv_type, mha):
    """One llama-bench process per cache type: given lists, -ctk and -ctv would sweep K x V."""
    cmd = [str(bench_bin), "-m", str(gguf), "-o", "jsonl", "-fa", "1", "-r", str(a.repetitions),
           "-p", ",".join(map(str, a.n_prompt)), "-n", ",".join(map(str, a.n_gen)),
           "-d", ",".join(map(str, a.n_depth)), "-t", ",".join(map(str, a.threads)),
           "-ctk", kv_type, "-ctv", kv_type, "-b", str(a.batch), "-ub", str(a.batch)]
    if a.progress:
        cmd.append("--progress")
    print("bench_llamacpp: " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []  # llama-bench's stderr, kept for the variant it loaded and for a failure's message

    def drain():
        for line in proc.stderr:
            err.append(line)
            if a.progress:
                sys.stderr.write(line)
    reader = threading.Thread(target=drain)
    reader.start()
    for line in proc.stdout:
        # ggml logs the variant as it loads it, long before the first row ends
        variant = loaded_variant("".join(err))
        if variant != check["ggml_cpu_variant"]:
            proc.kill()
            fail(f"llama-bench loaded libggml-cpu-{variant}, the logits check {check['ggml_cpu_variant']}")
        print(json.dumps(with_mha(row(json.loads(line), a, release, variant, check), mha)), flush=True)
    rc = proc.wait()
    reader.join()
    if rc != 0:
        sys.stderr.write("".join(err))
        fail(f"llama-bench exited {rc}")


def main(argv):
    a = parse_args(argv)
    mha = mha_rows(a.mha)
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        fail(f"{platform.system()} {platform.machine()}: the prebuilt package used here is Linux x86-64")
    root = a.cache / a.version
    root.mkdir(parents=True, exist_ok=True)
    bins, src, release = fetch(root, a.version)
    bench_bin, check_bin = build(bins, src, root)
    gguf = model(a, src, root)
    check = logits_check(check_bin, gguf, a)
    if check["check"] != "ok":
        fail("llama.cpp's logits failed the check above; no rows timed")
    for kv_type in a.kv_cache:
        bench(bench_bin, gguf, a, release, check, kv_type, mha)


if __name__ == "__main__":
    main(sys.argv[1:])
