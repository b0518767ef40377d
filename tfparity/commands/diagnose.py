"""``tfparity diagnose``: say what a user's inputs_embeds tensor is, and how to fix it."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import TfparityError
from .common import (
    add_report_arguments,
    finish,
    frameworks_frozen,
    tolerance,
)
from .naming import add_model_naming

TOP_LEVEL = ("verdict", "candidates", "recovered_ids_match", "fix")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diagnose",
        help="identify what a saved inputs_embeds tensor is (e.g. hidden_states[0])",
        description="Compare EMBEDS with every stage the model's embedding layer computes "
        "from IDS (word, +position, +token type, after LayerNorm, scaled), recover the ids "
        "the embeddings encode, compare the outputs, and say how to fix the pipeline. "
        "Exit 0 only for raw word embeddings of IDS whose outputs match.",
    )
    add_model_naming(p, "diagnose")
    p.add_argument("--ids", required=True, metavar="IDS.npy", help="input ids [batch, seq]")
    p.add_argument(
        "--embeds", required=True, metavar="EMBEDS.npy", help="embeddings [batch, seq, hidden]"
    )
    p.add_argument("--attention-mask", metavar="MASK.npy", help="[batch, seq], 1 = real token")
    p.add_argument("--token-type-ids", metavar="TYPES.npy", help="[batch, seq]")
    p.add_argument("--position-ids", metavar="POSITIONS.npy", help="[batch, seq]")
    add_report_arguments(p)
    p.set_defaults(func=_run_diagnose)


def _run_diagnose(args: argparse.Namespace) -> int:
    from ..api import load_model
    from ..checks.diagnose import DiagnoseOptions, InputNames, check_diagnose, diagnose_inputs
    from ..report.sections import render_diagnose

    files = {
        "ids": ("--ids", args.ids),
        "embeds": ("--embeds", args.embeds),
        "attention_mask": ("--attention-mask", args.attention_mask),
        "token_type_ids": ("--token-type-ids", args.token_type_ids),
        "position_ids": ("--position-ids", args.position_ids),
    }
    arrays = {k: None if f is None else _read_npy(f, flag) for k, (flag, f) in files.items()}
    names = InputNames(**{k: f"{flag} {f}" for k, (flag, f) in files.items()})
    inputs = diagnose_inputs(**arrays, names=names)  # bad files fail before the model loads
    options = DiagnoseOptions.from_arguments(tolerance=tolerance(args))
    frameworks_frozen()
    model = load_model(args.model, allow_pickle=args.allow_pickle)
    report = check_diagnose(model, inputs, options)
    print(render_diagnose(report))
    return finish(args, [report], TOP_LEVEL)


def _read_npy(path: str, flag: str) -> Any:
    """One ``.npy`` array (no pickles), or exit 2 naming the flag and the file."""
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError as exc:
        raise TfparityError(f"{flag}: no such file: {path}.") from exc
    except (OSError, ValueError, EOFError) as exc:
        raise TfparityError(
            f"{flag}: {path} is not a readable .npy array (corrupt, truncated, or an "
            f"object array, which is not loaded for safety): {exc}"
        ) from exc
    if not isinstance(array, np.ndarray):  # np.load returns an NpzFile for .npz archives
        names = ", ".join(array.files)
        array.close()
        raise TfparityError(
            f"{flag}: {path} is an .npz archive (arrays: {names}), not one .npy array; save "
            "the array with np.save, or extract it: np.save('x.npy', np.load(path)['name'])."
        )
    if array.size == 0:
        raise TfparityError(f"{flag}: {path} holds an empty array {list(array.shape)}.")
    return array
