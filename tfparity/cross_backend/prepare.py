"""MODELs that are not a ``.keras`` file yet: a ``keras-hub:<SPEC>`` or a Python callable
``module:function``, turned into one ``.keras`` file that every backend's process loads.

Every backend must get the same weights from the same file. A keras-hub conversion or a
callable's build is done once, on TensorFlow, by the TensorFlow backend's own serving
process (this module run as ``python -m tfparity.cross_backend.prepare --serve``,
:func:`serve`; the caller hands :func:`prepare` that process as its ``step``); it saves
the model whole to a temporary ``.keras``, and every backend's worker, that one too,
then loads the file as it loads a user's (``keras_hub`` imported first for a backbone,
the callable's module for a callable). ``python -m tfparity.cross_backend.prepare KIND
MODEL --out PATH`` runs one preparing step alone (:func:`main`).

Why the whole model and not ``save_weights`` into each process's own build: the float64
referee rebuilds the model from its config anyway (so it must serialize), a build that
draws its weights or structure from state (a seed, a global) cannot differ between
processes when there is one build, and a weights file loaded into a different build
fails late and by position, where ``load_model`` fails early and by class name.

For a keras-hub spec from a Hugging Face checkpoint the same process also runs the HF
PyTorch model at float64 on the same inputs (as ``crosscheck`` builds its referee), and
names which backbone layer holds each of HF's hidden states, so the parent can judge
every backend against Hugging Face too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..adapters.keras_backends.hidden_states import hidden_state_layers, task_hidden_state_layers
from ..adapters.keras_backends.model_files import built_model, save_quantised, tokenised_inputs
from ..errors import TfparityError

# The serving module of a run whose TensorFlow process also prepares (:func:`serve`).
ENTRY = "tfparity.cross_backend.prepare"
# Runs the preparing arguments (:func:`main`'s) in a TensorFlow process; its errors are
# in the meta it writes (:class:`.processes.Processes`).
Step = Callable[[list[str]], None]
# A callable MODEL: ``package.module:function`` (``tiny:bert`` is a spec, not a callable).
CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
SPEC_PREFIXES = ("tiny", "keras-hub")
PREPARE_TIMEOUT_S = 900


def missing_module(target: str) -> str | None:
    """Why ``module:function``'s module cannot be found (looked up, not imported, so a
    typo exits 2 before any process starts), or None."""
    import importlib.util

    module = target.split(":", 1)[0]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"{target}: no module named {module} (is it on PYTHONPATH?)."


def model_kind(model: str) -> str:
    """``keras-hub``, ``callable`` or ``file`` (anything else: read as a .keras file,
    which refuses it by name)."""
    if model.strip().startswith("keras-hub:"):
        return "keras-hub"
    head = model.split(":", 1)[0]
    if CALLABLE.match(model) and head not in SPEC_PREFIXES and not Path(model).exists():
        return "callable"
    return "file"


def worker_imports(kind: str, model: str, imports: tuple[str, ...]) -> tuple[str, ...]:
    """The modules every backend's worker imports for ``model`` of ``kind``: the user's,
    and what registers the prepared file's classes (keras-hub, or the callable's
    module; for a ``keras-hub file``, a .keras holding a keras-hub model, keras-hub).
    Known before preparing, so the workers can start importing first."""
    hub = ("keras_hub",)
    extra = {"keras-hub": hub, "keras-hub file": hub, "callable": (model.split(":")[0],)}
    return tuple(dict.fromkeys((*imports, *extra.get(kind, ()))))


@dataclass
class Prepared:
    """What the preparing process wrote: the ``.keras`` file, the inputs in the model's
    input order, the modules every worker imports, and for a keras-hub spec the HF
    float64 referee (``hf``: HF names -> arrays), which layer holds each HF name
    (``aliases``) and the rows' mask (padded positions are not compared with HF)."""

    path: Path
    inputs: list[np.ndarray]
    imports: tuple[str, ...]
    hf: dict[str, np.ndarray] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    mask: np.ndarray | None = None
    reference: str = ""
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] | None = None  # the file's model config, once read

    def model_config(self) -> dict[str, Any]:
        """The prepared file's model config, read from the file once per run."""
        from ..adapters.keras_backends.inputs import read_config

        if self.config is None:
            self.config = read_config(self.path)
        return self.config


@dataclass(frozen=True)
class HubInputs:
    """The inputs a keras-hub spec runs on, as ``crosscheck`` takes them."""

    random: int | None = 2
    seq_len: int = 8
    seed: int = 0
    texts: tuple[str, ...] | None = None


def prepare(
    model: str,
    kind: str,
    workdir: Path,
    imports: tuple[str, ...] = (),
    given: HubInputs = HubInputs(),
    pt: str | None = None,
    *,
    step: Step,
) -> Prepared:
    """Prepare ``model`` (``kind`` from :func:`model_kind`) on TensorFlow, writing into
    ``workdir``, by ``step`` (it runs :func:`main`'s arguments in a serving TensorFlow
    process, :func:`serve`); a failure is a TfparityError with its one paragraph (a
    missing module or function, a non-model, a bad spec)."""
    out = workdir / "prepared"
    arguments = [kind, model, "--out", str(out)]
    arguments += [a for m in imports for a in ("--import", m)]
    arguments += ["--given", json.dumps(given.__dict__)] + (["--pt", pt] if pt else [])
    step(arguments)
    meta = _meta(out)
    if not Path(f"{out}.npz").exists() or "error" in meta:
        raise TfparityError(meta.get("error") or f"preparing {model} failed: it wrote nothing")
    with np.load(f"{out}.npz") as held:
        arrays = {k: held[k] for k in held.files}
    return Prepared(
        path=Path(f"{out}.keras"),
        inputs=[arrays[f"input:{name}"] for name in meta["inputs"]],
        imports=tuple(meta["imports"]),
        hf={k.split(":", 1)[1]: v for k, v in arrays.items() if k.startswith("hf:")},
        aliases=meta.get("aliases", {}),
        mask=arrays.get("mask"),
        reference=meta.get("reference", ""),
        notes=meta.get("notes", []),
    )


def quantised_copy(
    path: Path, mode: str, imports: tuple[str, ...], workdir: Path, *, step: Step
) -> Path:
    """``path`` (a float ``.keras``) quantised by Keras to ``mode`` on TensorFlow, once,
    through :mod:`tfparity.adapters.tf_common.quantize` (the one place tfparity
    quantises), and saved beside it: every backend then loads the same quantised file.
    A failure is a TfparityError with its one paragraph."""
    out = workdir / "quantised"
    arguments = ["quantize", str(path), "--out", str(out), "--mode", mode]
    arguments += [a for m in imports for a in ("--import", m)]
    step(arguments)
    meta = _meta(out)
    if not Path(f"{out}.keras").exists() or "error" in meta:
        raise TfparityError(meta.get("error") or f"quantising {path} failed: it wrote nothing")
    return Path(f"{out}.keras")


def tokenised_file_inputs(
    path: Path, workdir: Path, imports: tuple[str, ...], given: HubInputs, *, step: Step
) -> list[np.ndarray]:
    """The inputs of a keras-hub backbone or task saved at ``path``, made as a keras-hub
    spec makes them (token ids, padding mask, segment ids where declared: ``given``'s
    rows), by ``step`` in the run's TensorFlow process, which loads the file to learn
    its inputs (its config does not list them); in the model's input order."""
    out = workdir / "inputs"
    arguments = ["hub-inputs", str(path), "--out", str(out), "--given", json.dumps(given.__dict__)]
    step(arguments + [a for m in imports for a in ("--import", m)])
    meta = _meta(out)
    if not Path(f"{out}.npz").exists() or "error" in meta:
        raise TfparityError(meta.get("error") or f"reading the inputs of {path} failed")
    with np.load(f"{out}.npz") as held:
        return [held[f"input:{name}"] for name in meta["inputs"]]


def _meta(out: Path) -> dict[str, Any]:
    """What a preparing step wrote beside ``out`` (an ``error`` where it failed)."""
    path = Path(f"{out}.json")
    return json.loads(path.read_text()) if path.exists() else {}


def _quantize(args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """Load the float file on TensorFlow, quantise it, save it whole."""
    meta["mode"] = save_quantised(args.model, f"{args.out}.keras", args.mode, args.imports)
    return {}


# ----------------------------------------------------------------------------- the child


def _callable(args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """Build, save, and make seeded inputs from the saved file's config."""
    from ..adapters.keras_backends.inputs import random_inputs, read_config

    model = built_model(args.model, args.imports)
    model.save(f"{args.out}.keras")
    given = json.loads(args.given)
    config = read_config(Path(f"{args.out}.keras"))
    arrays = random_inputs(config, given["random"] or 2, given["seq_len"], given["seed"])
    meta["inputs"] = [f"input_{k}" for k in range(len(arrays))]
    meta["imports"] = list(worker_imports("callable", args.model, tuple(args.imports)))
    return {f"input:input_{k}": a for k, a in enumerate(arrays)}


def _hub_inputs(args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """Load a keras-hub model's file, make its tokenised inputs
    (:func:`tokenised_file_inputs`)."""
    given = json.loads(args.given)
    names, arrays = tokenised_inputs(
        args.model, args.imports, given["random"] or 2, given["seq_len"], given["seed"]
    )
    meta["inputs"] = names
    return {f"input:{n}": a for n, a in zip(names, arrays, strict=True)}


def _hub(args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """Convert the spec as crosscheck does, save the model it names (the backbone, or
    the causal-LM task where the spec names or implies one, so its logits are judged:
    ``keras-hub:tiny:gpt2/causal-lm``), run HF at float64."""
    from ..inputs import InputOptions, make_batches
    from ..orchestration import pair

    given = json.loads(args.given)
    sides = pair(args.model, args.pt)
    side, reference = sides.tf, sides.reference
    options = InputOptions(
        texts=tuple(given["texts"]) if given["texts"] else None,
        random=None if given["texts"] else given["random"],
        seq_len=given["seq_len"],
        seed=given["seed"],
        batch_size=max(len(given["texts"] or ()), given["random"] or 1),  # one batch: all rows
    )
    batch = make_batches(side, options)[0]
    model = side.model  # the task (KerasHubCausalLM), else the backbone
    model.save(f"{args.out}.keras")
    feed = side.inputs(batch)
    meta["inputs"] = [t.name for t in model.inputs]
    meta["imports"] = list(worker_imports("keras-hub", args.model, tuple(args.imports)))
    meta["notes"] = [n for n in side.notes if n != side.how_embeds_run()]  # no embeds here
    arrays = {f"input:{n}": np.asarray(feed[n]) for n in meta["inputs"]}
    if reference is not None:
        task = model is not side.backbone
        meta["aliases"] = (task_hidden_state_layers if task else hidden_state_layers)(model)
        meta["reference"] = f"Hugging Face {reference.name} at float64"
        hf = reference.run(batch, float64=True)
        arrays.update({f"hf:{k}": np.asarray(hf[k]) for k in meta["aliases"] if k in hf})
        arrays["mask"] = np.asarray(batch.attention_mask)
    return arrays


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tfparity-backends-prepare")
    p.add_argument("kind", choices=("keras-hub", "callable", "quantize", "hub-inputs"))
    p.add_argument("model")
    p.add_argument("--out", required=True)
    p.add_argument("--import", dest="imports", action="append", default=[])
    p.add_argument("--given", default="{}")
    p.add_argument("--pt")
    p.add_argument("--mode", help="quantize: the Keras quantisation mode")
    args = p.parse_args(argv)
    meta: dict[str, Any] = {}
    try:
        step = {
            "keras-hub": _hub,
            "callable": _callable,
            "quantize": _quantize,
            "hub-inputs": _hub_inputs,
        }[args.kind]
        arrays = step(args, meta)
        np.savez(f"{args.out}.npz", **arrays)
        code = 0
    except Exception as e:  # the parent reports it as bad input, one paragraph
        text = " ".join(str(e).split())
        meta = {"error": text if isinstance(e, TfparityError) else f"{type(e).__name__}: {text}"}
        code = 2
    Path(f"{args.out}.json").write_text(json.dumps(meta))
    return code


def serve(argv: list[str]) -> None:
    """A backend's serving worker (:func:`tfparity.adapters.keras_backends.worker.serve`)
    that also answers ``prepare ARGUMENTS`` (a JSON list, :func:`main`'s): run as
    ``python -m tfparity.cross_backend.prepare --serve [--import M]...``, the TensorFlow
    backend's process converts or builds the model itself, then runs it, so the parent
    imports no framework and TensorFlow, Keras and keras-hub are imported once, in a
    process started before anything else (:data:`ENTRY`)."""
    from ..adapters.keras_backends import worker

    p = argparse.ArgumentParser(prog="tfparity-backends-prepare --serve")
    p.add_argument("--import", dest="imports", action="append", default=[])
    imports = p.parse_args(argv).imports
    reply, sys.stdout = sys.stdout, sys.stderr  # what a framework prints: off the protocol
    worker.serve(imports, sys.stdin, reply, {"prepare": lambda text: main(json.loads(text))})


def temporary_workdir() -> tempfile.TemporaryDirectory:
    """Where the prepared file lives until every backend has run."""
    return tempfile.TemporaryDirectory(prefix="tfparity-prepared-")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2:])
        sys.exit(0)
    sys.exit(main())
