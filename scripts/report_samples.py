"""Write tests/report/data/: a small real report of every command that writes one.

    python scripts/report_samples.py               # rewrite every sample
    python scripts/report_samples.py --only NAME   # one sample (repeatable)
    python scripts/report_samples.py --list        # the samples

Each sample is a ``tfparity`` command line on a tiny model (or the example Keras model
of ``tfparity backends``), run in-process in a scratch directory after the setups of
scripts/doc_examples.py it needs (the broken GPT-2 port, the ``.keras`` files, the
prompts), with its exit code checked. Its ``--json`` file is kept as NAME.json and what
it printed as NAME.txt, the scratch directory's path replaced by ``<dir>`` in both;
``sweep`` writes no report but its ``summary.json``, kept as NAME.json.

tests/report/test_renderers.py renders them (``tfparity.render``, the HTML page, the
assertion message) and holds the rendering of each report read back from its JSON to
what its command printed; tests/report/test_report_samples.py holds the files to this
table and re-runs the cheapest sample to see that its JSON still has the same fields.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "report" / "data"
_spec = importlib.util.spec_from_file_location("doc_examples", ROOT / "scripts" / "doc_examples.py")
doc_examples = importlib.util.module_from_spec(_spec)
sys.modules["doc_examples"] = doc_examples  # its dataclasses look their module up
_spec.loader.exec_module(doc_examples)

KERAS = ("--import", "tfparity.examples.keras_backends_model")
SMALL = ("--random", "2", "--seq-len", "8")


@dataclass(frozen=True)
class Sample:
    """One command's report: ``argv`` (``--json NAME.json`` is added; a sweep's
    ``--out`` directory holds its summary), the ``exit`` code it must end with, and the
    doc_examples ``setup`` it needs first."""

    name: str
    argv: tuple[str, ...]
    exit: int
    setup: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        return self.argv[0]


SAMPLES = (
    Sample("check", ("check", "tiny:bert", *SMALL), 0),
    Sample("crosscheck", ("crosscheck", "tiny:gpt2/causal-lm", *SMALL), 0),
    Sample(
        "crosscheck-fail",
        ("crosscheck", "--tf", "gpt2-ffn", "--pt", "tiny:gpt2/causal-lm", "--no-reload", *SMALL),
        1,
        ("gpt2-ffn",),
    ),
    Sample(
        "crosscheck-quantised",
        ("crosscheck", "keras-hub:tiny:llama/causal-lm", "--pt-config", "rms_norm_eps=1e-06")
        + ("--no-reload", "--quantize", "int8", *SMALL),
        0,
    ),
    Sample(
        "diagnose",
        ("diagnose", "tiny:bert", "--ids", "diag/ids.npy", "--embeds", "diag/embeds.npy")
        + ("--attention-mask", "diag/mask.npy", "--token-type-ids", "diag/types.npy"),
        1,
        ("diag-tiny",),
    ),
    Sample("embeddings", ("embeddings", "tiny:bert"), 0),
    Sample("positions", ("positions", "tiny:bert/masked-lm", "--permutations", "2", *SMALL), 0),
    Sample("generate", ("generate", "tiny:gpt2/causal-lm", "--new-tokens", "4"), 0),
    Sample(
        "generate-fail",
        ("generate", "gpt2-ffn", "--pt", "tiny:gpt2/causal-lm", "--new-tokens", "4"),
        1,
        ("gpt2-ffn",),
    ),
    Sample("gradients", ("gradients", "tiny:bert", "--random", "1", "--seq-len", "6"), 0),
    Sample("modes", ("modes", "tiny:bert", *SMALL), 0),
    Sample(
        "runtimes", ("runtimes", "bert.tflite", "--threads", "1,2", *SMALL), 0, ("litert-fp32",)
    ),
    Sample(
        "sweep",
        ("sweep", "tiny:gpt2/causal-lm", "--texts", "prompts5.txt", "--checks", "crosscheck")
        + ("--out", "sweep", "--progress", "none"),
        0,
        ("prompts5",),
    ),
    Sample("backends", ("backends", "model.keras", *KERAS, *SMALL), 0, ("keras-backends",)),
    Sample(
        "backends-fail", ("backends", "jax-fault.keras", *KERAS, *SMALL), 1, ("keras-backends",)
    ),
    Sample(
        "backends-quantised",
        ("backends", "model.keras", *KERAS, "--backends", "tensorflow,jax", "--quantize", "int8")
        + SMALL,
        0,
        ("keras-backends",),
    ),
    Sample(
        "backends-quantised-fail",
        ("backends", "jax-fault.keras", *KERAS, "--backends", "tensorflow,jax")
        + ("--quantize", "int8", *SMALL),
        1,
        ("keras-backends",),
    ),
)
BY_NAME = {s.name: s for s in SAMPLES}
# The commands that write no report, and why no sample is made of them.
NO_REPORT = {
    "devices": "lists the devices (its --json is the listing, not a report)",
    "merge": "merges sweep shards into a summary.json: the sweep sample's shape",
}


def _diag_tiny(work: Path) -> None:
    """tiny:bert's ``hidden_states[0]`` given as its embeddings: diagnose's classic case."""
    doc_examples._script("make_diagnose_example", "tiny:bert", str(work / "diag"))


SETUPS = {**doc_examples.SETUPS, "diag-tiny": _diag_tiny}


def json_path(sample: Sample, work: Path) -> Path:
    """Where the run leaves its JSON: ``--json``'s file, or a sweep's summary."""
    if sample.command == "sweep":
        return work / sample.argv[sample.argv.index("--out") + 1] / "summary.json"
    return work / f"{sample.name}.json"


def run(sample: Sample, work: Path, done: set[str]) -> tuple[str, str]:
    """Run ``sample`` in ``work``; its JSON text and printed text, paths as ``<dir>``."""
    from tfparity.cli import main

    for name in sample.setup:
        if name not in done:
            with doc_examples._in(work):
                SETUPS[name](work)
            done.add(name)
    argv = list(sample.argv)
    if sample.command != "sweep":
        argv += ["--json", f"{sample.name}.json"]
    out = io.StringIO()
    with doc_examples._in(work), contextlib.redirect_stdout(out):
        code = main(argv)
    printed = _paths(out.getvalue(), work)
    if code != sample.exit:
        raise RuntimeError(f"{sample.name}: exit {code}, expected {sample.exit}:\n{printed}")
    return _paths(json_path(sample, work).read_text(), work), printed


def _paths(text: str, work: Path) -> str:
    """The scratch directory's path (either spelling) as ``<dir>``."""
    for path in sorted({str(work), os.path.realpath(work)}, key=len, reverse=True):
        text = text.replace(path, "<dir>")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="NAME", choices=sorted(BY_NAME))
    parser.add_argument("--list", action="store_true", help="list the samples")
    args = parser.parse_args(argv)
    if args.list:
        for s in SAMPLES:
            print(f"{s.name:26} exit {s.exit}  tfparity {' '.join(s.argv)}")
        return 0
    chosen = [BY_NAME[n] for n in args.only] if args.only else list(SAMPLES)
    DATA.mkdir(parents=True, exist_ok=True)
    done: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="tfparity-samples-") as tmp:
        work = Path(tmp)
        for sample in chosen:
            data, printed = run(sample, work, done)
            (DATA / f"{sample.name}.json").write_text(data)
            (DATA / f"{sample.name}.txt").write_text(printed)
            print(f"wrote {sample.name} ({len(data) // 1024} KiB)")
            if sample.command == "sweep":
                shutil.rmtree(work / "sweep")
    return 0


if __name__ == "__main__":
    sys.exit(main())
