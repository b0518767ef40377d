"""One way of running a model (device, graph or XLA, precision, TF32), as plain data.

Kept apart from :mod:`.execution`, which does the running, so the declared TF-side
interface and the CLI can name an ExecutionOptions without importing TensorFlow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from ...errors import TfparityError
from .devices import resolve_devices, short_name

Precision = Literal["fp32", "fp16", "bf16"]
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")
# The tf-keras mixed-precision policy each precision builds its model under.
POLICIES = {"fp32": None, "fp16": "mixed_float16", "bf16": "mixed_bfloat16"}
_COMPUTE_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# From this many batches a path's one trace saves more than it costs against eager calls.
GRAPH_FROM_BATCHES = 8


@dataclass(frozen=True)
class ExecutionOptions:
    """One way of running a model.

    ``device``: a TF device name (``/device:GPU:0``) or ``None`` for TensorFlow's
    own placement. ``graph``: ``tf.function``; ``xla``: ``tf.function(jit_compile=True)``
    (implies graph). ``tf32``: ``None`` leaves TensorFlow's setting alone. ``auto``:
    eager or graph is chosen by :meth:`settle` from the number of batches.
    """

    device: str | None = None
    xla: bool = False
    graph: bool = False
    precision: Precision = "fp32"
    tf32: bool | None = None
    auto: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise TfparityError(
                f"Unknown precision '{self.precision}'; use one of {', '.join(PRECISIONS)}."
            )

    @property
    def compiled(self) -> bool:
        return self.xla or self.graph

    @property
    def runner_kind(self) -> str:
        return "xla" if self.xla else ("graph" if self.graph else "eager")

    @property
    def compute_dtype(self) -> str:
        """The dtype the model computes in; TF32 matmuls count as ``tf32``."""
        if self.precision == "fp32" and self.tf32:
            return "tf32"
        return _COMPUTE_DTYPES[self.precision]

    @property
    def label(self) -> str:
        """``eager``, ``xla``, ``graph+fp16``, ``tf32``: what differs from eager fp32."""
        parts = [self.runner_kind] if self.compiled else []
        if self.precision != "fp32":
            parts.append(self.precision)
        if self.tf32:
            parts.append("tf32")
        return "+".join(parts) or "eager"

    def settle(self, batches: int) -> ExecutionOptions:
        """With ``auto``: graph when each path runs at least :data:`GRAPH_FROM_BATCHES`
        batches (the one-off trace then pays for itself), eager below."""
        if not self.auto or self.xla:
            return self
        return replace(self, graph=batches >= GRAPH_FROM_BATCHES)

    def describe(self) -> dict[str, Any]:
        """Plain facts for a report's details."""
        facts = {
            "device": short_name(self.device) if self.device else "default",
            "execution": self.runner_kind,
            "precision": self.precision,
            "tf32": self._tf32_text(),
        }
        if self.auto and not self.xla:
            n = GRAPH_FROM_BATCHES
            facts["execution_chosen"] = f"auto (eager below {n} batches, graph from {n})"
        return facts

    def _tf32_text(self) -> str:
        if self.device and not is_gpu(self.device):
            return "n/a"  # TF32 is a GPU matmul mode
        return "default" if self.tf32 is None else ("on" if self.tf32 else "off")


_MODE_PART = re.compile(r"^(eager|graph|xla|fp32|fp16|bf16|tf32)$")


def parse_mode(mode: str, device: str | None = None) -> ExecutionOptions:
    """``xla``, ``fp16``, ``graph+bf16``, ``tf32`` … -> ExecutionOptions on ``device``.

    On a GPU, modes that do not ask for TF32 turn it off, so an "fp32" mode is real
    fp32 there too (TensorFlow enables TF32 by default on Ampere and newer).
    """
    parts = [p.strip().lower() for p in mode.split("+") if p.strip()]
    bad = [p for p in parts if not _MODE_PART.match(p)]
    if not parts or bad:
        raise TfparityError(
            f"Unknown mode '{mode}'. Modes are eager, graph, xla, fp16, bf16, tf32, or "
            "combinations joined by '+' (e.g. xla+fp16)."
        )
    precision = next((p for p in parts if p in ("fp16", "bf16")), "fp32")
    if "fp16" in parts and "bf16" in parts:
        raise TfparityError(f"Mode '{mode}' asks for both fp16 and bf16.")
    return ExecutionOptions(
        device=device,
        xla="xla" in parts,
        graph="graph" in parts,
        precision=precision,  # type: ignore[arg-type]
        tf32=True if "tf32" in parts else (False if is_gpu(device) else None),
    )


def eager_only(options: ExecutionOptions, who: str) -> ExecutionOptions:
    """``options`` for a side that runs eagerly in float32 on TensorFlow's default
    placement only (keras-hub, a user's own model): anything else asked for explicitly
    is exit 2, never ignored; ``auto`` settles on eager, what really runs."""
    explicit_graph = options.graph and not options.auto
    if options.precision != "fp32" or options.xla or explicit_graph:
        raise TfparityError(
            f"{who} run eagerly in float32 here; --precision fp16/bf16, --graph and "
            "--xla are for Hugging Face TF models."
        )
    if options.device and "CPU" not in options.device.upper():
        raise TfparityError(
            f"{who} run on TensorFlow's default placement here; --device "
            f"{options.device} is for Hugging Face TF models."
        )
    return replace(options, graph=False)


def is_gpu(device: str | None) -> bool:
    return bool(device) and short_name(device).startswith("gpu")


def expand_devices(options: ExecutionOptions, spec: str | None) -> list[ExecutionOptions]:
    """One ExecutionOptions per device that ``spec`` names (``None``: TF's choice)."""
    if spec is None:
        return [options]
    return [replace(options, device=name) for name in resolve_devices(spec)]
