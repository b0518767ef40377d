"""Write docs/command-matrix.md's table: every command run on every kind of model.

    python scripts/command_matrix.py              # run every pair, write the page
    python scripts/command_matrix.py --kinds litert,savedmodel   # some kinds (their rows)

Each command (``check`` ... ``sweep --checks positions``) runs in this process through
``tfparity.cli.main`` on each kind of MODEL (tiny checkpoints with their heads, a
keras-hub spec, files a user has: a saved keras-hub task, a ``.keras`` of their own, a
SavedModel, a LiteRT flatbuffer, an ONNX file, a quantised ``.keras``) on the smallest
inputs. A pair ends in a verdict (exit 0 PASS, 1 FAIL) or in exit 2 with tfparity's
message naming why that command does not take that model. Anything else (an exception
escaping ``main``, the catch-all "please report it") is a CRASH, which
tests/cli/test_command_matrix.py refuses. That test runs the same pairs and holds the
page to their outcomes.

``backends`` is not in the matrix: it takes Keras 3 models only and needs its warm
backend processes; tests/cross_backend/test_backends*.py run it on keras-hub specs,
``.keras`` files (float and quantised) and models of one's own.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "command-matrix.md"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

TABLE_START = "<!-- table: written by scripts/command_matrix.py -->"
TABLE_END = "<!-- end of table -->"
CATCH_ALL = "please report it"
SMALL = ("--random", "1", "--seq-len", "4", "--batch-size", "1")


@dataclass(frozen=True)
class Command:
    """One column: a command line without its MODEL, and the options it needs."""

    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Kind:
    """One row: how a user names this kind of model (MODEL, and the checkpoint that
    gives an export its config and tokenizer)."""

    name: str
    label: str
    model: str
    companion: str | None = None


@dataclass(frozen=True)
class Outcome:
    """A pair's end: its exit code and, for exit 2 or a crash, the message's gist."""

    code: int
    reason: str = ""
    crashed: bool = False

    def cell(self) -> str:
        if self.crashed:
            return f"CRASH: {self.reason}"
        if self.code in (0, 1):
            return ("PASS", "FAIL")[self.code]
        return f"exit 2: {self.reason}"


def commands(inputs: Path) -> tuple[Command, ...]:
    """The columns; ``inputs`` is the folder :func:`write_inputs` filled."""
    texts = str(inputs / "texts.txt")
    sweep = ("--texts", texts, "--batch-size", "1", "--progress", "none")
    return (
        Command("check", ("check", *SMALL)),
        Command("crosscheck", ("crosscheck", "--no-reload", *SMALL)),
        Command("diagnose", ("diagnose", "--ids", str(inputs / "ids.npy"))),
        Command("embeddings", ("embeddings", *SMALL, "--noise-scales", "0,1")),
        Command("positions", ("positions", *SMALL, "--permutations", "1")),
        Command("generate", ("generate", "--random", "1", "--seq-len", "3", "--new-tokens", "2")),
        Command("gradients", ("gradients", *SMALL)),
        Command("modes", ("modes", "--modes", "graph", *SMALL)),
        Command("runtimes", ("runtimes", *SMALL)),
        Command("sweep embeds", ("sweep", *sweep, "--checks", "embeds")),
        Command("sweep crosscheck", ("sweep", *sweep, "--checks", "crosscheck")),
        Command("sweep positions", ("sweep", *sweep, "--checks", "positions")),
        Command("sweep --generate", ("sweep", *sweep, "--generate", "2")),
    )


def write_inputs(folder: Path) -> Path:
    """The files commands read: a one-line corpus, and ids for ``diagnose`` (its
    ``--embeds`` are written per kind: the model's width)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "texts.txt").write_text("a short text\n", encoding="utf-8")
    np.save(folder / "ids.npy", np.array([[1, 5, 7, 2]], dtype=np.int32))
    return folder


def embeds_for(kind: Kind, inputs: Path) -> Path:
    """Random ``[1, 4, hidden]`` embeddings at the width of ``kind``'s checkpoint."""
    import numpy as np

    from tfparity.adapters.sources.tiny import tiny_config

    spec = kind.companion or kind.model
    family = spec.removeprefix("keras-hub:").removeprefix("tiny:").split("/")[0]
    if not spec.startswith(("tiny:", "keras-hub:tiny:")):
        family = "gpt2" if "gpt2" in spec else "bert"
    config = tiny_config(family)
    width = getattr(config, "hidden_size", None) or config.d_model
    path = inputs / f"embeds-{width}.npy"
    if not path.exists():
        rng = np.random.default_rng(0)
        np.save(path, rng.standard_normal((1, 4, width)).astype(np.float32))
    return path


# ----------------------------------------------------------------- the kinds of model

SPECS = (
    Kind("mlm", "tiny encoder, masked-LM head", "tiny:bert/masked-lm"),
    Kind("classifier", "tiny encoder, classifier head", "tiny:distilbert/sequence-classification"),
    Kind("causal-lm", "tiny decoder, causal-LM head", "tiny:gpt2/causal-lm"),
    Kind("seq2seq", "tiny encoder-decoder (T5)", "tiny:t5"),
    Kind("keras-hub", "keras-hub spec", "keras-hub:tiny:bert"),
)


def hub_task_files(root: Path) -> tuple[Path, Path, str]:
    """A keras-hub GPT-2 ``CausalLM`` converted from the tiny checkpoint, saved float
    and after ``quantize("int8")``; and that checkpoint's folder."""
    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.keras_hub.side import import_keras_hub

    ckpt = checkpoint_dir("gpt2")
    task = import_keras_hub().models.CausalLM.from_preset(str(ckpt), preprocessor=None)
    task.save(root / "hub-task.keras")
    task.quantize("int8")
    task.save(root / "hub-task-int8.keras")
    return root / "hub-task.keras", root / "hub-task-int8.keras", str(ckpt)


def user_keras_files(root: Path) -> tuple[Path, Path]:
    """A user's Keras 3 models saved to ``.keras``, over tiny:bert's vocabulary: a
    functional one of built-in layers, and a subclassed one (registered, as a user's
    is once their module is imported). Neither is BERT: their outputs differ from it."""
    import keras
    import numpy as np

    from tfparity.adapters.sources.tiny import tiny_config

    config = tiny_config("bert")
    ids = keras.Input((None,), dtype="int32", name="input_ids")
    hidden = keras.layers.Embedding(config.vocab_size, config.hidden_size)(ids)
    functional = keras.Model(ids, keras.layers.Dense(config.hidden_size)(hidden))
    functional.save(root / "user-functional.keras")
    subclassed = subclassed_model(config.vocab_size, config.hidden_size)
    subclassed(np.zeros((1, 4), dtype="int32"))  # built
    subclassed.save(root / "user-subclassed.keras")
    return root / "user-functional.keras", root / "user-subclassed.keras"


def subclassed_model(vocab_size: int, width: int):
    """A subclassed Keras 3 model: word embeddings and one dense layer."""
    import keras

    @keras.saving.register_keras_serializable(package="tfparity_matrix")
    class Encoder(keras.Model):
        def __init__(self, vocab_size: int, width: int, **kwargs) -> None:
            super().__init__(**kwargs)
            self.vocab_size, self.width = vocab_size, width
            self.embed = keras.layers.Embedding(vocab_size, width)
            self.dense = keras.layers.Dense(width)

        def call(self, input_ids):
            return self.dense(self.embed(input_ids))

        def get_config(self) -> dict:
            return {**super().get_config(), "vocab_size": self.vocab_size, "width": self.width}

    return Encoder(vocab_size, width)


def litert_file(root: Path) -> Path:
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import to_litert

    return to_litert(TFModel.load("tiny:bert"), root / "bert.tflite")


def onnx_file(root: Path) -> Path:
    """tiny:bert's PyTorch model exported to ONNX by torch's legacy exporter (dynamic
    axes, every hidden state an output), as a user exports it for checking."""
    import transformers

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_torch

    ckpt = str(checkpoint_dir("bert"))
    model = transformers.BertModel.from_pretrained(ckpt, attn_implementation="eager").eval()
    return export_torch(model, root / "bert.onnx")


def saved_model_dir(root: Path) -> Path:
    """tiny:bert as a SavedModel, hidden states and an inputs_embeds signature included
    (tests/conftest.py's ``tiny_bert_export("clean")``, which the test hands in)."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import export_saved_model

    return export_saved_model(TFModel.load("tiny:bert"), root / "clean", inputs_embeds=True)


FILE_KINDS = (
    "hub-task",
    "user-functional",
    "user-subclassed",
    "savedmodel",
    "litert",
    "onnx",
    "quantised",
)


def file_kinds(
    root: Path, saved_model: Callable[[Path], Path] = saved_model_dir
) -> tuple[Kind, ...]:
    """The kinds that are files, built under ``root`` (``saved_model`` may hand one
    built already: the test session's)."""
    task, task_int8, ckpt = hub_task_files(root)
    functional, subclassed = user_keras_files(root)
    return (
        Kind("hub-task", "saved keras-hub task (.keras)", str(task), ckpt),
        Kind("user-functional", "your .keras, functional", str(functional), "tiny:bert"),
        Kind("user-subclassed", "your .keras, subclassed", str(subclassed), "tiny:bert"),
        Kind("savedmodel", "SavedModel", str(saved_model(root)), "tiny:bert"),
        Kind("litert", "LiteRT flatbuffer", str(litert_file(root)), "tiny:bert"),
        Kind("onnx", "ONNX file (PyTorch export)", str(onnx_file(root)), "tiny:bert"),
        Kind("quantised", "quantised .keras (int8 keras-hub task)", str(task_int8), ckpt),
    )


# ----------------------------------------------------------------- one pair


def argv_for(command: Command, kind: Kind, inputs: Path, out: Path) -> list[str]:
    """The command line a user would type: MODEL, its checkpoint by ``--pt`` (or
    ``--source`` where the command has no ``--pt``; neither where it takes none), and
    the files the command needs."""
    from tfparity.commands.naming import NAMING

    argv = [command.argv[0], kind.model, *command.argv[1:]]
    takes = NAMING[command.argv[0]].takes
    if kind.companion:
        flag = next((f for f in ("--pt", "--source") if f in takes), None)
        if flag:
            argv += [flag, kind.companion]
    if command.argv[0] == "diagnose":
        argv += ["--embeds", str(embeds_for(kind, inputs))]
    if command.argv[0] == "sweep":
        argv += ["--out", str(out)]
    return argv


def run_pair(command: Command, kind: Kind, inputs: Path, out: Path) -> tuple[Outcome, str]:
    """Run one pair in this process: its outcome, and everything it printed."""
    from tfparity.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    argv = argv_for(command, kind, inputs, out)
    crash = None
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        except Exception as exc:  # noqa: BLE001 - the matrix's whole point is to see these
            code, crash = 2, f"{type(exc).__name__}: {exc}"
    err = stderr.getvalue()
    text = f"$ tfparity {' '.join(argv)}\n{stdout.getvalue()}{err}"
    if crash is not None:
        return Outcome(2, _gist(crash), crashed=True), text
    if CATCH_ALL in err or code not in (0, 1, 2):
        return Outcome(code, _gist(_error_line(err)), crashed=True), text
    return Outcome(code, _gist(_error_line(err)) if code == 2 else ""), text


def _error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("tfparity: error:")]
    return lines[-1].removeprefix("tfparity: error:").strip() if lines else err.strip()[-200:]


def _gist(message: str, width: int = 120) -> str:
    """The message cut to ``width`` at a word, its paths to their names, table-safe."""
    import re

    text = " ".join(message.split()).replace("|", "/")
    text = re.sub(r"(?<![\w.])/[^\s:]*/([^\s/:]+)", r"\1", text)  # the build folder varies
    if len(text) > width:
        text = text[: width - 3].rsplit(" ", 1)[0] + " ..."
    return text


# ----------------------------------------------------------------- the page


def render(kinds: tuple[Kind, ...], columns: tuple[str, ...], cells: dict) -> str:
    """A row per kind, a column per command; an exit 2 cell holds a letter, and the
    reasons follow the table, each once."""
    reasons: dict[str, str] = {}
    lines = [
        "| model | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for kind in kinds:
        row = []
        for name in columns:
            cell = cells.get((kind.name, name), "")
            if cell.startswith(EXIT_2):
                reason = cell.removeprefix(EXIT_2)
                letter = reasons.setdefault(reason, _letter(len(reasons)))
                cell = f"exit 2 ({letter})"
            row.append(cell)
        lines.append(f"| {kind.label} (`{kind.name}`) | " + " | ".join(row) + " |")
    lines.append("")
    lines += [f"- ({letter}) {reason}" for reason, letter in reasons.items()]
    return "\n".join(lines) + "\n"


EXIT_2 = "exit 2: "


def _letter(i: int) -> str:
    return chr(ord("a") + i) if i < 26 else f"{chr(ord('a') + i // 26 - 1)}{chr(ord('a') + i % 26)}"


def _table(page: str) -> str:
    return page.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]


def read_table(page: str | None = None) -> dict[tuple[str, str], str]:
    """(kind, command) -> cell, as the page holds them (a reason's letter resolved)."""
    body = _table(page if page is not None else PAGE.read_text(encoding="utf-8"))
    lines = body.strip().splitlines()
    reasons = {}
    for line in lines:
        if line.startswith("- ("):
            letter, reason = line.removeprefix("- (").split(") ", 1)
            reasons[letter] = reason
    rows = [ln for ln in lines if ln.startswith("|")]
    if not rows:
        return {}
    columns = [c.strip() for c in rows[0].strip("|").split("|")][1:]
    cells = {}
    for line in rows[2:]:
        model, *row = (c.strip() for c in line.strip("|").split("|"))
        name = model.rsplit("(`", 1)[1].rstrip("`)")
        for column, cell in zip(columns, row, strict=True):
            if cell.startswith("exit 2 ("):
                cell = EXIT_2 + reasons[cell.removeprefix("exit 2 (").rstrip(")")]
            if cell:
                cells[name, column] = cell
    return cells


def labels(page: str | None = None) -> dict[str, str]:
    """Kind name -> its label, as the page's rows hold them."""
    body = _table(page if page is not None else PAGE.read_text(encoding="utf-8"))
    rows = [ln for ln in body.strip().splitlines() if ln.startswith("|")][2:]
    found = {}
    for line in rows:
        label, name = line.strip("|").split("|")[0].strip().rsplit(" (`", 1)
        found[name.rstrip("`)")] = label
    return found


def write(kinds: tuple[Kind, ...], columns: tuple[str, ...], cells: dict) -> None:
    """Put the cells on the page; kinds not run keep their rows."""
    page = PAGE.read_text(encoding="utf-8")
    merged = {**read_table(page), **cells}
    head, rest = page.split(TABLE_START, 1)
    tail = rest.split(TABLE_END, 1)[1]
    order = [k.name for k in (*SPECS, *(Kind(n, "", "") for n in FILE_KINDS))]
    label_of = {**labels(page), **{k.name: k.label for k in kinds}}
    rows = tuple(Kind(n, label_of[n], "") for n in order if n in label_of)
    body = render(rows, columns, merged)
    PAGE.write_text(f"{head}{TABLE_START}\n{body}{TABLE_END}{tail}", encoding="utf-8")


def main() -> int:
    import tempfile
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", help="comma-separated kind names (default: every one)")
    parser.add_argument("--verbose", action="store_true", help="print what each pair printed")
    parser.add_argument("--dry-run", action="store_true", help="print, do not write the page")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tfparity-matrix-"))
    inputs = write_inputs(root / "inputs")
    kinds = (*SPECS, *file_kinds(root))
    if args.kinds:
        wanted = args.kinds.split(",")
        kinds = tuple(k for k in kinds if k.name in wanted)
    columns = commands(inputs)
    cells = {}
    for kind in kinds:
        for i, command in enumerate(columns):
            start = time.perf_counter()
            outcome, text = run_pair(command, kind, inputs, root / f"sweep-{kind.name}-{i}")
            cells[kind.name, command.name] = outcome.cell()
            took = time.perf_counter() - start
            print(f"{kind.name:16} {command.name:18} {took:5.1f}s {outcome.cell()}", flush=True)
            if outcome.crashed or args.verbose:
                print(text[-3000:], flush=True)
    if not args.dry_run:
        write(kinds, tuple(c.name for c in columns), cells)
        print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
