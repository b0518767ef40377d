#!/usr/bin/env python3
"""Benchmarks, as ratios measured in the same run on this machine (not timed tests).

(a) overhead: what `tfparity check` runs (the embeds check and one cross-check pass,
    Python API, reload=False, TF eager or traced as the CLI chooses, tracing included)
    on N batches, against a minimal hand-written script doing only the same forward
    passes (TF ids and TF embeds eagerly, PyTorch fp32), against that script plus the
    PyTorch float64 pass that tfparity's referee adds, and against the same passes as
    already-traced tf.functions (what is left: the fp64 pass, tracing, comparisons);
(b) sweep throughput: `run_sweep` (embeds check, bucketed compiled batches) against a
    naive per-sentence eager loop (tokenize one sentence, run ids and embeds, compare);
(c) startup: `tfparity --help` against `python -c "import tensorflow"`; and an argument
    error (`tfparity check --text ''`, exit 2 before any framework import) against --help;
(d) peak memory (max RSS of a child process) of a sweep over a small and a 10x
    larger corpus: it should stay flat;
(e) scale: the machine's sgemm rate (numpy float32 matmul, measured here); the sweep
    with embeds and cross-check under --referee lazy and full (items/s, float64 items,
    its useful FLOP rate as a share of sgemm); `tfparity crosscheck --no-reload` (taps
    on failure only) against the bare forward passes it needs (TF ids traced, PyTorch
    fp32 and fp64); the Ray engine on 1 vs 2 local workers, one CPU thread each, and
    the machine's ceiling for that ratio (2 single-threaded processes against one)
    (scripts/bench_scale.py, bench_crosscheck.py, bench_ray.py);
(l) LiteRT: `crosscheck` of an fp32 LiteRT flatbuffer of MODEL (static [8, 64], hidden
    states read from its intermediate tensors) against the bare passes it needs: the
    plain interpreter's signature runner on the padded batches, PyTorch fp32 and fp64
    (scripts/bench_litert.py);
(h) gradients: `tfparity gradients` (check_gradients: ids vs embeds and TF vs PyTorch,
    float64 referee) against the bare backward passes it needs, hand-written (TF
    input_ids and inputs_embeds under a GradientTape, PyTorch float32 and float64
    autograd, every weight's gradient); the ratio, measured in the same run
    (scripts/bench_gradients.py);
(f) kernels: the sweep under --referee lazy and full, once with TF's default oneDNN CPU
    kernels and once with its Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0): float64 share,
    items/s and whether the verdicts are identical (scripts/bench_scale.py);
(k) a head model: `tfparity check` (the embeds check and one cross-check pass, as the
    CLI runs them) on a fine-tuned-shaped sequence classifier (MiniLM's body and a seeded
    3-label classifier, saved by save_pretrained in a temporary directory) against the
    bare compiled passes it needs (TF ids and TF embeds as fresh tf.functions, PyTorch
    fp32 and fp64), both cold (tracing included), alternated over rounds; and against
    the same bare passes with float64 on as many batches as the check's lazy referee ran
    (scripts/bench_head.py);
(q) distribution metrics: llama.cpp's KL statistics and the --kl-budget bootstrap on
    a GPT-2-small-shaped causal LM against the TF and PyTorch passes they judge
    (scripts/bench_distribution.py);
(t) backends: `tfparity backends keras-hub:tiny:bert` (and on the converted .keras file)
    against the bare per-backend processes (KERAS_BACKEND, keras + keras_hub, load the
    file, one forward pass), alternated over rounds, wall and CPU time
    (scripts/bench_backends.py);
(o) ONNX: `crosscheck` of MODEL's legacy ONNX export against the bare passes it needs
    (the file on ONNX Runtime, PyTorch fp32 and fp64) (scripts/bench_onnx.py);
(y) requantisation: `crosscheck` of a stored int8 .keras with and without its exact check
    against a fresh quantisation of its source (scripts/bench_requantisation.py);
(g) generate: `tfparity.generate` on a tiny GPT-2 causal LM (3 prompts x 32 new tokens,
    models loaded beforehand), with and without the start from inputs_embeds, against
    the bare HF TF `generate` and PyTorch `generate` calls that produce the same tokens
    (scripts/bench_generation.py).

    python scripts/bench.py            # default sizes: a few minutes on 2 CPU cores
    python scripts/bench.py --quick    # smaller sizes, about a minute or two
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_common import PY, TFPARITY, corpus_file, timed

from tfparity.sweep import DEFAULT_CORPUS


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes for a quick CPU run")
    p.add_argument("--model", default="minilm", help="model for (a) and (b) (default minilm)")
    p.add_argument("--mem-model", default="tiny:bert", help="model for (d) (default tiny:bert)")
    p.add_argument(
        "--batches",
        type=int,
        help="(a) batches of 8 sentences (default 31: the repo corpus; quick 8)",
    )
    p.add_argument("--sweep-items", type=int, help="(b) corpus size (default 1000; quick 245)")
    p.add_argument("--naive-items", type=int, help="(b) naive loop items (default 120; quick 40)")
    p.add_argument("--mem-items", type=int, help="(d) small corpus (default 1000; quick 300)")
    p.add_argument("--cross-sentences", type=int, help="(e) crosscheck sentences (default 256)")
    p.add_argument("--ray-items", type=int, help="(e) Ray corpus size (default 980; quick 245)")
    p.add_argument(
        "--baseline-ref",
        help="(e) also time the sweep of this git revision (e.g. 55faf23) against this tree",
    )
    p.add_argument(
        "--only",
        help="comma-separated subset of a,b,c,d,e,f,g,h,k,l,o,q,t,y (r: e's referees only; "
        "x: e's cross-check overhead only)",
    )
    p.add_argument("--gen-model", default="tiny:gpt2/causal-lm", help="causal LM for (g)")
    args = p.parse_args()
    q = args.quick
    batches = args.batches or (8 if q else 31)
    sweep_items = args.sweep_items or (245 if q else 1000)
    naive_items = args.naive_items or (40 if q else 120)
    mem_items = args.mem_items or (300 if q else 1000)
    only = set((args.only or "a,b,c,d,e,f,g,h,k,l,o,q,t,y").split(","))

    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"sizes: {'quick' if q else 'default'}")
    texts = DEFAULT_CORPUS.read_text(encoding="utf-8").splitlines()
    if "c" in only:
        startup()
    if "a" in only or "b" in only:
        from tfparity.api import load_model

        model = load_model(args.model)
        if "a" in only:
            overhead(model, args.model, texts, batches)
        if "b" in only:
            throughput(model, texts, sweep_items, naive_items)
    if "d" in only:
        memory(args.mem_model, texts, mem_items)
    if "r" in only:
        from bench_scale import sgemm_rate, sweep_referees

        sweep_referees(args.model, sgemm_rate())
    if "f" in only:
        from bench_scale import kernels

        kernels(args.model)
    if "x" in only:
        from bench_crosscheck import crosscheck_overhead

        crosscheck_overhead(args.model, texts, args.cross_sentences or 256)
    if "g" in only:
        from bench_generation import generation

        generation(args.gen_model, 32)
    if "l" in only:
        from bench_litert import litert_overhead

        litert_overhead(args.model, texts, 64 if q else 256)
    if "o" in only:
        from bench_onnx import onnx_overhead

        onnx_overhead(args.model, texts, 64 if q else 256)
    if "k" in only:
        from bench_head import head_check_overhead

        head_check_overhead(texts, args.cross_sentences or 248, rounds=7)
    if "q" in only:
        from bench_distribution import distribution_overhead

        distribution_overhead(8 if q else 16, 64 if q else 128)
    if "t" in only:
        from bench_backends import backends_overhead

        backends_overhead(rounds=2 if q else 3)
    if "y" in only:
        from bench_requantisation import requantisation_overhead

        requantisation_overhead(rounds=2 if q else 3)
    if "h" in only:
        from bench_gradients import gradients_overhead

        gradients_overhead(args.model, texts, 2 if q else 4)
    if "e" in only:
        from bench_scale import scale

        scale(
            args.model,
            texts,
            args.cross_sentences or 256,
            args.ray_items or (245 if q else 980),
            args.baseline_ref,
        )
    return 0


# ----------------------------------------------------------------------------- (a)


def overhead(model, spec: str, texts: list[str], n_batches: int) -> None:
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.adapters.runtime.execution_options import ExecutionOptions
    from tfparity.adapters.runtime.imports import import_torch
    from tfparity.api import crosscheck, make_batches
    from tfparity.checks.embeds import EmbedsOptions, check_embeds
    from tfparity.inputs import InputOptions

    torch = import_torch()
    pt = load_pt(spec)
    sentences = [texts[i % len(texts)] for i in range(8 * n_batches)]
    batches = make_batches(model, InputOptions(texts=tuple(sentences), batch_size=8))
    tf_model, matrix = model.model, model.word_embeddings()
    graph = model.executed(ExecutionOptions(graph=True))  # traced once, reused

    def tf_ids():
        for b in batches:
            tf_model(
                b.input_ids,
                attention_mask=b.attention_mask,
                token_type_ids=b.token_type_ids,
                output_hidden_states=True,
                training=False,
            )

    def tf_embeds():
        import tensorflow as tf

        for b in batches:
            tf_model(
                None,
                inputs_embeds=tf.gather(matrix, b.input_ids),
                attention_mask=b.attention_mask,
                token_type_ids=b.token_type_ids,
                output_hidden_states=True,
                training=False,
            )

    def tf_graph():  # both TF passes as already-traced tf.functions
        for b in batches:
            graph.run(b)
            graph.run(b, graph.gather(b.input_ids))

    def pt_run(m):
        def run():
            with torch.no_grad():
                for b in batches:
                    m(**pt.torch_inputs(b), output_hidden_states=True)

        return run

    def ours_check():
        # What `tfparity check` does, tracing included (a fresh model wrapper per run, as
        # in each CLI run): execution chosen by batch count, the TF ids runs shared by
        # both checks, the cross-check localising only when something fails.
        execution = ExecutionOptions(auto=True).settle(len(batches))
        executed = model.executed(execution)
        references = [executed.run(b) for b in batches]
        check_embeds(executed, batches, EmbedsOptions(references=references))
        crosscheck(tf=executed, pt=pt, batches=batches, localise="on_failure", tf_traces=references)

    def ours_cross():
        crosscheck(tf=model, pt=pt, batches=batches)  # `tfparity crosscheck`: always localises

    t = {
        "TF ids (eager)": timed(tf_ids),
        "TF embeds (eager)": timed(tf_embeds),
        "TF ids + embeds (traced)": timed(tf_graph),
        "PT fp32": timed(pt_run(pt.model)),
        "PT fp64": timed(pt_run(pt.fp64())),
        "tfparity check": timed(ours_check),
        "crosscheck with taps": timed(ours_cross),
    }
    minimal = t["TF ids (eager)"] + t["TF embeds (eager)"] + t["PT fp32"]
    compiled = t["TF ids + embeds (traced)"] + t["PT fp32"]
    ours = t["tfparity check"]
    n = len(sentences)
    execution = ExecutionOptions(auto=True).settle(len(batches)).runner_kind
    print(f"\n(a) overhead: {n_batches} batches of 8 sentences, {model.name}, after a warm-up")
    for k, v in t.items():
        print(f"    {k:<26} {v:7.2f} s")
    print(f"    minimal (TF ids + TF embeds eager + PT fp32)   {minimal:7.2f} s")
    print(
        f"    tfparity check (embeds + crosscheck; TF {execution}, tracing included) "
        f"{ours:7.2f} s  ({n / ours:.1f} sentences/s)"
    )
    print(f"    overhead vs minimal:                       {ours / minimal:.2f}x  (goal <= 1.10x)")
    print(f"    overhead vs minimal + PT fp64:             {ours / (minimal + t['PT fp64']):.2f}x")
    print(
        f"    overhead vs the same passes pre-traced (+ PT fp32): {ours / compiled:.2f}x "
        f"(+ PT fp64: {ours / (compiled + t['PT fp64']):.2f}x)"
    )
    extra = t["crosscheck with taps"] - (t["TF ids (eager)"] + t["PT fp32"] + t["PT fp64"])
    print(f"    crosscheck with taps and isolated runs, beyond its 3 forward passes: {extra:.2f} s")


# ----------------------------------------------------------------------------- (b)


def throughput(model, texts: list[str], n_sweep: int, n_naive: int) -> None:
    from tfparity.sweep import SweepOptions, run_sweep

    with tempfile.TemporaryDirectory(prefix="tfparity-bench-") as tmp:
        corpus = corpus_file(texts, n_sweep, Path(tmp))
        start = time.perf_counter()
        result = run_sweep(
            model, corpus, Path(tmp) / "out", SweepOptions(checks=("embeds",), progress="none")
        )
        sweep_s = time.perf_counter() - start
    naive_s = naive_loop(model, [texts[i % len(texts)] for i in range(n_naive)])
    sweep_rate, naive_rate = n_sweep / sweep_s, n_naive / naive_s
    run = result.summary["run"]
    print(f"\n(b) sweep throughput, embeds check, {model.name}")
    print(
        f"    tfparity sweep: {n_sweep} items in {sweep_s:.1f} s = {sweep_rate:.1f} items/s "
        f"(batch {run['batch_size']}, {run['batches']} batches, {run['traces']} traces, "
        "tracing included)"
    )
    print(
        f"    naive per-sentence eager loop: {n_naive} items in {naive_s:.1f} s = "
        f"{naive_rate:.1f} items/s"
    )
    print(f"    speed-up: {sweep_rate / naive_rate:.1f}x  (goal >= 5x)")


def naive_loop(model, sentences: list[str]) -> float:
    """How people write it by hand: one sentence at a time, eager, both paths, compare."""
    import tensorflow as tf

    m, tok, matrix = model.model, model.tokenizer, model.word_embeddings()

    def run(sents):
        for s in sents:
            enc = tok([s], return_tensors="np")
            kw = {"attention_mask": enc["attention_mask"]}
            if "token_type_ids" in enc:
                kw["token_type_ids"] = enc["token_type_ids"]
            a = m(enc["input_ids"], output_hidden_states=True, training=False, **kw)
            e = tf.gather(matrix, enc["input_ids"])
            b = m(None, inputs_embeds=e, output_hidden_states=True, training=False, **kw)
            for x, y in zip(a.hidden_states, b.hidden_states, strict=True):
                float(np.abs(x.numpy() - y.numpy()).max())

    run(sentences[:2])  # warm-up
    start = time.perf_counter()
    run(sentences)
    return time.perf_counter() - start


# ----------------------------------------------------------------------------- (c)


def startup() -> None:
    def wall(cmd: list[str], code: int = 0) -> float:
        start = time.perf_counter()
        result = subprocess.run(cmd, capture_output=True)
        assert result.returncode == code, (cmd, result.stderr[-500:])
        return time.perf_counter() - start

    helps = [wall([PY, "-m", "tfparity", "--help"]) for _ in range(3)]
    tfs = [wall([PY, "-c", "import tensorflow"]) for _ in range(3)]
    h, t = statistics.median(helps), statistics.median(tfs)
    print(
        f"\n(c) startup (median of 3): tfparity --help {h:.2f} s; "
        f"python -c 'import tensorflow' {t:.2f} s; ratio {h / t:.2f}"
    )
    # an argument error (exit 2) is decided before any framework import: about --help's time
    refusals = [wall([*TFPARITY, "check", "--text", ""], code=2) for _ in range(3)]
    r = statistics.median(refusals)
    print(f"    argument error: tfparity check --text '' {r:.2f} s; ratio to --help {r / h:.2f}")


# ----------------------------------------------------------------------------- (d)


def memory(spec: str, texts: list[str], small: int) -> None:
    print(f"\n(d) peak memory of a sweep ({spec}, embeds check), max RSS of the child process")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfparity-bench-") as tmp:
        for n in (small, 10 * small):
            corpus = corpus_file(texts, n, Path(tmp))
            cmd = TFPARITY + [
                "sweep",
                spec,
                "--texts",
                str(corpus),
                "--checks",
                "embeds",
                "--out",
                str(Path(tmp) / f"out{n}"),
                "--progress",
                "none",
            ]
            rss, seconds = child_peak_rss(cmd)
            rows.append((n, rss, seconds))
            print(f"    {n:>6} items: max RSS {rss / 1024:.0f} MiB ({seconds:.0f} s)")
    ratio = rows[1][1] / rows[0][1]
    print(f"    10x the items -> {ratio:.2f}x the peak memory (flat: close to 1)")


def child_peak_rss(cmd: list[str]) -> tuple[int, float]:
    """Max RSS (KiB) of ``cmd``, measured in a fresh helper so that no earlier child
    counts (RUSAGE_CHILDREN keeps the maximum over all children waited for)."""
    helper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - t,"
        " rc)\n"
    )
    out = subprocess.run([PY, "-c", helper, *cmd], check=True, capture_output=True, text=True)
    rss, seconds, rc = out.stdout.split()
    if rc not in ("0", "1"):
        raise SystemExit(f"sweep failed (exit {rc}): {' '.join(cmd)}\n{out.stderr}")
    return int(rss), float(seconds)


if __name__ == "__main__":
    raise SystemExit(main())
