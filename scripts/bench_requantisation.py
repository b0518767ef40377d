"""(y) What the exact check of a stored quantised ``.keras`` costs (issue 41: at most one
extra quantisation of the source and one forward pass per differing variable).

A keras-hub causal LM converted from a tiny HF checkpoint is quantised to int8 and saved
twice: clean, and with one block's feed-forward ``kernel_scale`` x1.5. Each file is
cross-checked against its reference (``tfparity.crosscheck(tf=FILE, pt=...)``, in this
process) with the exact check and without it (``fresh_twin`` patched to return None: the
plain budget cross-check of the same file), alternated over rounds, the ratio taken per
round. The exact check's parts are timed apart too: the source's conversion, its one
quantisation, and one forward pass of the stored model over the same batches.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SPEC = "tiny:llama/causal-lm"
SCALE = "transformer_layer_1/feedforward_output_dense/kernel_scale"


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _files(directory: Path) -> dict[str, str]:
    import numpy as np

    from tfparity.adapters.keras_hub.quantised_side import quantised_side
    from tfparity.adapters.keras_hub.task import load_keras_hub_side

    model = quantised_side(load_keras_hub_side(f"keras-hub:{SPEC}"), "int8").model
    paths = {"clean": str(directory / "clean.keras"), "x1.5": str(directory / "x15.keras")}
    model.save(paths["clean"])
    (scale,) = [v for v in model.weights if v.path == SCALE]
    scale.assign(np.asarray(scale) * 1.5)
    model.save(paths["x1.5"])
    return paths


def requantisation_overhead(rounds: int = 3) -> None:
    import tfparity.adapters.keras_hub.requantise as requantise
    from tfparity.adapters.keras_hub.quantised_side import quantised_side
    from tfparity.adapters.keras_hub.task import load_keras_hub_side
    from tfparity.adapters.tf_common.quantize import layer_modes
    from tfparity.api import crosscheck, load_model, make_batches
    from tfparity.architectures.heads import Head
    from tfparity.inputs import InputOptions

    real = requantise.fresh_twin
    eps = {"rms_norm_eps": 1e-6}
    with tempfile.TemporaryDirectory(prefix="tfparity-bench-requant-") as tmp:
        paths = _files(Path(tmp))

        def run(path: str, exact: bool) -> Callable[[], object]:
            def go() -> object:
                requantise.fresh_twin = real if exact else (lambda *a, **k: None)
                try:
                    (report,) = crosscheck(tf=path, pt=SPEC, pt_config=eps)
                finally:
                    requantise.fresh_twin = real
                return report

            return go

        for name in paths:  # warm-up: imports, first traces
            run(paths[name], True)()
        times: dict[str, list[float]] = {}
        for _ in range(rounds):
            for name, path in paths.items():
                for exact in (False, True):
                    label = f"{name} {'exact' if exact else 'plain'}"
                    times.setdefault(label, []).append(_timed(run(path, exact)))
        stored = load_model(paths["clean"], companion=SPEC)
        layers = list(layer_modes(stored.model))
        source: dict[str, object] = {}

        def convert() -> None:
            source["side"] = load_keras_hub_side(f"keras-hub:{SPEC}", Head.BASE)

        parts = {
            "convert the source": convert,
            "quantise it once": lambda: quantised_side(source["side"], "int8", layers),
        }
        batches = make_batches(stored, InputOptions())
        parts["one forward pass"] = lambda: [stored.run(b) for b in batches]
        part_times = {k: min(_timed(fn) for _ in range(rounds)) for k, fn in parts.items()}
    print(
        f"(y) exact check of a stored int8 .keras ({SPEC}, {len(batches)} batches), {rounds} rounds"
    )
    for name in paths:
        plain, exact = times[f"{name} plain"], times[f"{name} exact"]
        ratios = [e / p for e, p in zip(exact, plain, strict=True)]
        print(
            f"  {name}: crosscheck {statistics.median(plain):.2f} s, with the exact check "
            f"{statistics.median(exact):.2f} s: x{statistics.median(ratios):.2f} "
            f"(rounds {', '.join(f'x{r:.2f}' for r in ratios)})"
        )
    for k, t in part_times.items():
        print(f"  {k}: {t:.2f} s")
