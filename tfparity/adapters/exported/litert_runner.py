"""Running a LiteRT flatbuffer: its signature runner fed a batch padded to the model's
static shapes, its outputs cut back to the batch, its intermediate tensors read.

The interpreter is ``ai-edge-litert``'s (the ``litert`` extra) where installed, else
``tf.lite.Interpreter``. Two are made, lazily: a plain one for the outputs, and one that
keeps every intermediate tensor (``experimental_preserve_all_tensors``) for the hidden
states and sub-layer values, which costs memory and is made only when they are read.

Padding: a model converted with a fixed ``[batch, seq]`` takes exactly that. Shorter
sequences are padded with the pad id under a zero attention mask; missing rows repeat
the chunk's first row (a row of padding only is no real input), and a larger batch runs
in chunks. Every output is cut back to the real rows and tokens, so padding never
reaches a verdict.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures.heads import SPAN_OUTPUTS
from ...errors import TfparityError
from ...inputs import Batch
from ..runtime.imports import import_tf

# Signature input names, per role: Hugging Face serving names, keras-hub's, TF Hub's.
INPUT_ROLES = {
    "ids": ("input_ids", "token_ids", "input_word_ids"),
    "mask": ("attention_mask", "padding_mask", "input_mask"),
    "types": ("token_type_ids", "segment_ids", "input_type_ids"),
    "positions": ("position_ids",),
}
# Signature output names -> the Hugging Face names the reference uses.
_OUTPUTS = {"sequence_output": "last_hidden_state", "pooled_output": "pooler_output"}
_HIDDEN_OUTPUT = re.compile(r"^hidden_states_(\d+)$")


def runtime_name() -> str:
    """Which LiteRT interpreter runs here, in words (for reports)."""
    try:
        from importlib.metadata import version

        return f"ai-edge-litert {version('ai-edge-litert')}"
    except Exception:
        return f"tf.lite.Interpreter (TensorFlow {import_tf().__version__})"


@dataclass(frozen=True)
class Kernels:
    """Which kernels the interpreter runs a flatbuffer with: ``resolver``, the name of
    the op resolver (``AUTO``: the optimised kernels with XNNPACK, LiteRT's default;
    ``BUILTIN_REF``: the reference kernels; ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``: the
    optimised kernels without XNNPACK), and ``threads`` (None: the interpreter's own
    choice). ``tfparity runtimes`` runs one file under several (:mod:`.litert_kernels`)."""

    resolver: str = "AUTO"
    threads: int | None = None

    def content(self, data: bytes) -> bytes:
        """The flatbuffer the interpreter is given: the file's, as shipped (a kernel set
        that runs an op its own way, a test's broken one, rewrites it here)."""
        return data


def make_interpreter(path: Path, preserve: bool, kernels: Kernels = Kernels()) -> Any:
    """An interpreter for the flatbuffer at ``path`` under ``kernels``, its tensors
    allocated; ``preserve``: it keeps every intermediate tensor readable."""
    with warnings.catch_warnings():  # both warn: a deprecation, a debugging option
        warnings.simplefilter("ignore")
        try:
            from ai_edge_litert.interpreter import Interpreter, OpResolverType
        except ImportError:
            tf = import_tf()
            Interpreter, OpResolverType = tf.lite.Interpreter, tf.lite.experimental.OpResolverType
        try:
            data = path.read_bytes()
            content = kernels.content(data)
            interpreter = Interpreter(
                model_path=str(path) if content is data else None,
                model_content=None if content is data else content,
                experimental_preserve_all_tensors=preserve,
                experimental_op_resolver_type=getattr(OpResolverType, kernels.resolver),
                num_threads=kernels.threads,
            )
            interpreter.allocate_tensors()
            return interpreter
        except (ValueError, RuntimeError) as exc:
            raise TfparityError(f"LiteRT cannot load {path}: {exc}") from exc


@dataclass
class Runner:
    """One flatbuffer's signature runner, with the roles of its inputs."""

    path: Path
    signature: str
    inputs: dict[str, str]  # role -> signature input name
    static: tuple[int | None, int | None]  # [batch, seq]; None where dynamic
    pad_id: int
    kernels: Kernels = Kernels()
    _plain: Any = field(default=None, repr=False)
    _keeping: Any = field(default=None, repr=False)
    _runners: dict[bool, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def open(
        cls,
        path: Path,
        pad_id: int | None,
        signature: str | None = None,
        kernels: Kernels = Kernels(),
    ) -> Runner:
        interpreter = make_interpreter(path, False, kernels)
        signatures = interpreter.get_signature_list()
        if not signatures:
            raise TfparityError(
                f"{path} has no signature: tfparity runs a flatbuffer through its signature "
                "runner. Convert from a SavedModel or concrete functions (they add one)."
            )
        if signature is not None and signature not in signatures:
            raise TfparityError(
                f"{path} has no signature '{signature}'; its signatures: "
                f"{', '.join(sorted(signatures))}."
            )
        name = signature or (
            "serving_default" if "serving_default" in signatures else next(iter(signatures))
        )
        details = interpreter.get_signature_runner(name).get_input_details()
        inputs = {}
        for input_name in details:
            role = next((r for r, names in INPUT_ROLES.items() if input_name in names), None)
            if role is None:
                raise TfparityError(
                    f"{path}: signature '{name}' takes '{input_name}', which tfparity does not "
                    f"know; it feeds {', '.join(n for ns in INPUT_ROLES.values() for n in ns)}."
                )
            inputs[role] = input_name
        if "ids" not in inputs:
            raise TfparityError(f"{path}: signature '{name}' takes no token ids.")
        signature_shape = details[inputs["ids"]]["shape_signature"]
        static = tuple(int(d) if d > 0 else None for d in signature_shape[:2])
        return cls(path, name, inputs, static, pad_id or 0, kernels, _plain=interpreter)  # type: ignore[arg-type]

    def interpreter(self, keep: bool) -> Any:
        """The plain interpreter, or (``keep``) the one keeping intermediate tensors."""
        if not keep:
            return self._plain
        if self._keeping is None:
            self._keeping = make_interpreter(self.path, True, self.kernels)
        return self._keeping

    def output_names(self) -> list[str]:
        runner = self._plain.get_signature_runner(self.signature)
        return [hf_name(n) for n in runner.get_output_details()]

    def run(
        self, batch: Batch, keep: tuple[int, ...] = ()
    ) -> tuple[dict[str, np.ndarray], dict[int, np.ndarray]]:
        """The signature's outputs (Hugging Face names) for ``batch``, and the
        intermediate tensors ``keep`` indexes, both cut back to the batch."""
        if batch.position_ids is not None and "positions" not in self.inputs:
            raise TfparityError(f"{self.path} takes no position ids; leave them out.")
        b, s = batch.input_ids.shape
        rows = self.static[0] or b
        seq = self.static[1] or s
        if s > seq:
            raise TfparityError(
                f"{self.path} takes sequences of {seq} tokens at most (its static shape); "
                f"this batch has {s}. Give --seq-len {seq} or shorter texts."
            )
        graph = f"{self.path}'s signature '{self.signature}'"
        refuse_padding(batch, self.inputs, seq, graph, "Convert it with a dynamic sequence length")
        interpreter = self.interpreter(bool(keep))
        runner = self._runners.get(bool(keep))
        if runner is None:
            runner = self._runners[bool(keep)] = interpreter.get_signature_runner(self.signature)
        outs: list[dict[str, np.ndarray]] = []
        kept: list[dict[int, np.ndarray]] = []
        for start in range(0, b, rows):
            n = min(rows, b - start)
            feed = self._feed(batch, start, n, rows, seq)
            raw = runner(**feed)
            outs.append({hf_name(k): cut(hf_name(k), v, n, s) for k, v in raw.items()})
            kept.append({i: cut("", interpreter.get_tensor(i), n, s) for i in keep})
        joined = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
        return joined, {i: np.concatenate([k[i] for k in kept]) for i in keep}

    def _feed(self, batch: Batch, start: int, n: int, rows: int, seq: int) -> dict[str, Any]:
        return feed(batch, self.inputs, self.pad_id, slice(start, start + n), (rows, seq))


def padded(x: np.ndarray, rows: int, seq: int, pad: int) -> np.ndarray:
    """``x`` [n, s] as int32 [rows, seq]: tokens padded with ``pad``, rows with copies of
    the first row (their outputs are cut off)."""
    n, s = x.shape
    out = np.full((rows, seq), pad, np.int32)
    out[:n, :s] = x
    out[n:, :s] = x[0]
    return out


def cut(name: str, x: np.ndarray, n: int, s: int) -> np.ndarray:
    """An output cut back to the batch's ``n`` rows and (per-token outputs) ``s`` tokens."""
    x = np.array(x[:n])  # a copy: the interpreter reuses its buffers on the next call
    per_token = x.ndim >= 3 or name in SPAN_OUTPUTS
    return x[:, :s] if per_token else x


def hf_name(output: str) -> str:
    """A signature output's Hugging Face name (``hidden_states_2`` -> ``hidden_states[2]``)."""
    m = _HIDDEN_OUTPUT.match(output)
    return f"hidden_states[{m.group(1)}]" if m else _OUTPUTS.get(output, output)


def refuse_padding(batch: Batch, inputs: Any, seq: int, graph: str, remedy: str) -> None:
    """Exit 2 where padding would reach a graph (``graph``, in words) whose ``inputs``
    hold no mask to exclude it: the batch's own, or the tokens a static shape adds;
    ``remedy`` says how to make one without a static length."""
    if "mask" in inputs:
        return
    if not batch.attention_mask.all():
        raise TfparityError(
            f"{graph} takes no attention mask, and this batch holds padding; give batches "
            "without padding, each of one length."
        )
    if batch.input_ids.shape[1] < seq:
        raise TfparityError(
            f"{graph} takes no attention mask and exactly {seq} tokens (its static shape): "
            f"shorter sequences would be padded and the padding attended to. {remedy} or an "
            "attention_mask input."
        )


def feed(
    batch: Batch, inputs: dict[str, str], pad_id: int, rows: slice, shape: tuple[int, int]
) -> dict[str, np.ndarray]:
    """The graph's inputs by name (``inputs``: role -> name) for the batch's ``rows``,
    padded to ``shape`` (ids with ``pad_id``, the rest with 0): one feeding rule for
    every runtime that runs a graph whole (LiteRT, ONNX Runtime)."""
    parts = {
        "ids": (batch.input_ids, pad_id),
        "mask": (batch.attention_mask, 0),
        "types": (batch.token_type_ids, 0),
        "positions": (batch.position_ids, 0),
    }
    fed = {}
    for role, name in inputs.items():
        values, pad = parts[role]
        if values is None:  # no token types given: all segment 0
            values = np.zeros_like(batch.input_ids)
        fed[name] = padded(np.asarray(values[rows]), *shape, pad)
    return fed
