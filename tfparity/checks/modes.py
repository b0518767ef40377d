"""The modes check: the same inputs under every execution mode, against CPU eager fp32.

Modes: ``graph`` (tf.function), ``xla`` (tf.function(jit_compile=True)), ``fp16`` and
``bf16`` (tf-keras mixed_float16 / mixed_bfloat16 policies), ``tf32`` (GPUs of compute
capability 8.0+), each on every requested device; on a device other than the
reference CPU, ``eager`` fp32 too (cross-device parity). Every output and hidden state
is compared with the reference run.

Tolerances follow the mode's compute dtype, without an fp64 referee: the comparison
core's default ``rtol`` for that dtype (fp32 1.3e-6, fp16 1e-3, bf16 1.6e-2; TF32 keeps
10 mantissa bits like fp16, so it takes fp16's), and an ``atol`` scaled to the tensor:
``atol = scale * rtol * max|reference|`` (``scale`` = 4, at least the dtype's own atol).
Why scaled: torch's per-dtype defaults bound the rounding of *one* operation on an
element's own value, but a whole model's outputs are sums over hundreds of products
and LayerNorms, so an element near zero carries the rounding of its large neighbours.
A scale of 4 leaves deeper models headroom over the errors all-MiniLM-L6-v2 shows in
fp16 and bf16 (docs/devices-and-modes.md).
A broken mode still fails: a NaN, a corrupted weight or a wrong kernel moves outputs
by a sizeable fraction of their scale, far beyond a few units of the dtype's rounding
(tests check this), and a reduced-precision run judged with fp32's tolerance fails.
Explicit ``--atol/--rtol`` replace the rule for every mode.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .. import validation
from ..adapters.interfaces.sides import TFSide
from ..adapters.runtime.devices import resolve_devices, short_name, tf32_capable
from ..adapters.runtime.execution import PrecisionUnsupportedError
from ..adapters.runtime.execution_options import ExecutionOptions, parse_mode
from ..compare import (
    Comparison,
    Tolerance,
    compare_output_batches,
    default_tolerance,
    valid_positions,
)
from ..inputs import Batch, note_inputs
from ..results import Report
from ..trace import Trace, hidden_state_index, layer_text
from ..validation import NothingComparedError
from .embeds import ensure_finite

DEFAULT_MODES = ("eager", "graph", "xla", "fp16", "bf16", "tf32")
TOLERANCE_SCALE = 4.0
REFERENCE = "cpu:0 eager fp32"


@dataclass(frozen=True)
class ModesOptions:
    """``devices``: a ``--devices`` spec (cpu, gpu, gpu:N, all); ``modes``: which modes;
    ``tolerance``: a fixed tolerance for every mode instead of the scaled rule."""

    devices: str = "all"
    modes: tuple[str, ...] = DEFAULT_MODES
    tolerance: Tolerance | None = None
    scale: float = TOLERANCE_SCALE

    @classmethod
    def from_arguments(
        cls,
        *,
        devices: str = "all",
        modes: str | Sequence[str] | None = None,
        tolerance: Tolerance | None = None,
    ) -> ModesOptions:
        """The options :func:`tfparity.check_modes` and ``tfparity modes`` were given,
        checked once for both, before any framework import (exit 2 for a bad one).
        ``modes``: a sequence of modes, or ``--modes``'s comma-separated text; None:
        :data:`DEFAULT_MODES`. Each mode's grammar is checked here; whether it can run
        on this machine is known only once the devices are (:func:`check_modes`)."""
        validation.tolerance(tolerance)
        if not isinstance(devices, str) or not devices.strip():
            raise validation.ArgumentError(
                f"devices (--devices) must name devices (cpu, gpu:N, gpu, all), not {devices!r}."
            )
        if modes is None:
            return cls(devices=devices, tolerance=tolerance)
        named = modes.split(",") if isinstance(modes, str) else list(modes)
        if not all(isinstance(m, str) for m in named):
            raise TypeError(f"modes must be strings (eager, xla, fp16, ...), not {modes!r}.")
        chosen = tuple(m.strip() for m in named if m.strip())
        if not chosen:
            text = modes if isinstance(modes, str) else ",".join(modes)
            raise validation.ArgumentError(
                f"--modes '{text}' (modes=) names no mode; give e.g. --modes eager,xla,fp16."
            )
        for mode in chosen:
            parse_mode(mode)  # an unknown mode exits 2 now, not after the model loads
        return cls(devices=devices, modes=chosen, tolerance=tolerance)


@dataclass(frozen=True)
class PlannedMode:
    """A mode to run: its label in the report and how it runs."""

    label: str
    options: ExecutionOptions


def mode_tolerance(dtype: str, magnitude: float, scale: float = TOLERANCE_SCALE) -> Tolerance:
    """The tolerance for a tensor computed in ``dtype`` whose reference peaks at
    ``magnitude`` (see the module docstring for why atol scales with it)."""
    base = default_tolerance("float16" if dtype == "tf32" else dtype)
    return Tolerance(atol=max(base.atol, scale * base.rtol * float(magnitude)), rtol=base.rtol)


def plan_modes(devices: str, modes: Sequence[str]) -> tuple[list[PlannedMode], list[str]]:
    """The modes to run on each device of ``devices``, and notes on those skipped."""
    reference = resolve_devices("cpu")[0]
    plan, skipped = [], []
    for device in resolve_devices(devices):
        on_reference = short_name(device) == short_name(reference)
        for mode in modes:
            options = parse_mode(mode, device)
            if on_reference and options.label == "eager":
                continue  # that is the reference run itself
            if options.tf32 and not tf32_capable(device):
                skipped.append(
                    f"{mode} on {short_name(device)}: TF32 exists only on NVIDIA GPUs of "
                    "compute capability 8.0+"
                )
                continue
            label = mode if on_reference else f"{short_name(device)}/{mode}"
            plan.append(PlannedMode(label, options))
    return plan, skipped


def check_modes(
    model: TFSide, batches: Sequence[Batch], options: ModesOptions = ModesOptions()
) -> Report:
    """Run every planned mode on ``batches`` and compare it with CPU eager fp32."""
    plan, skipped = plan_modes(options.devices, options.modes)
    if not plan:  # comparing nothing must not read as a PASS
        why = "; ".join(skipped) or "the only mode asked for is the reference itself (cpu eager)"
        raise NothingComparedError(
            f"None of the modes {', '.join(options.modes)} can run on {options.devices}, so "
            f"nothing would be compared ({why}). Ask for modes this machine has "
            "(eager, graph, xla, fp16, bf16; tf32 needs an NVIDIA GPU of compute capability 8.0+)."
        )
    reference_model = model.executed(ExecutionOptions(device=resolve_devices("cpu")[0]))
    reference = [reference_model.run(b) for b in batches]
    for trace in reference:
        ensure_finite(trace, "the reference run (cpu:0 eager fp32)")
    masks = [b.attention_mask for b in batches]
    magnitudes = reference_magnitudes(reference, masks)
    comparisons: list[Comparison] = []
    rows: list[dict[str, Any]] = []
    notes = list(model.notes) + [f"not run: {s}" for s in skipped]
    unrun: list[str] = []
    for planned in plan:
        start = time.perf_counter()
        try:
            runner = model.executed(planned.options)
            traces = [runner.run(b) for b in batches]
        except PrecisionUnsupportedError as exc:  # one mode the model cannot run in
            unrun.append(f"{planned.label}: {exc}")
            continue
        seconds = time.perf_counter() - start
        found = compare_mode(planned, traces, reference, masks, magnitudes, options)
        comparisons.extend(found)
        rows.append(_row(planned, found, seconds, options))
        note = _first_failing_hidden_state(planned.label, found)
        if note:
            notes.append(note)
    if not comparisons:
        raise NothingComparedError(
            f"None of the modes {', '.join(p.label for p in plan)} ran, so nothing was "
            f"compared: {'; '.join(unrun)}"
        )
    notes += [f"not run: {u}" for u in unrun]
    report = Report(
        check="modes",
        model=model.name,
        passed=all(c.passed for c in comparisons),
        comparisons=comparisons,
        details={
            "reference": REFERENCE,
            **_input_details(batches),
            "modes": rows,
            "outputs": list(reference[0]),
        },
        notes=notes,
    )
    return note_inputs(report, batches)


def reference_magnitudes(reference: Sequence[Trace], masks: Sequence[Any]) -> dict[str, float]:
    """max |reference| of each tensor over the positions the attention mask keeps."""
    out: dict[str, float] = {}
    for name in reference[0]:
        peak = 0.0
        for trace, mask in zip(reference, masks, strict=True):
            array = np.asarray(trace[name], dtype=np.float64)
            keep = valid_positions(array.shape, mask, name)
            values = array[keep] if keep is not None else array
            finite = np.abs(values[np.isfinite(values)])
            peak = max(peak, float(finite.max()) if finite.size else 0.0)
        out[name] = peak
    return out


def compare_mode(
    planned: PlannedMode,
    traces: Sequence[Trace],
    reference: Sequence[Trace],
    masks: Sequence[Any],
    magnitudes: dict[str, float],
    options: ModesOptions = ModesOptions(),
) -> list[Comparison]:
    """One comparison per reference tensor, named ``<mode>:<tensor>``.

    The mode's outputs may be float16/bfloat16 while the reference is float32: dtypes
    are not compared, the mode's compute dtype picks the tolerance.
    """
    dtype = planned.options.compute_dtype

    def tolerance(name: str) -> Tolerance:
        return options.tolerance or mode_tolerance(dtype, magnitudes[name], options.scale)

    found = compare_output_batches(
        traces, reference, masks=masks, tolerance=tolerance, check_dtype=False
    )
    return [replace(c, name=f"{planned.label}:{c.name}") for c in found]


def _row(
    planned: PlannedMode, found: list[Comparison], seconds: float, options: ModesOptions
) -> dict[str, Any]:
    worst = max(found, key=lambda c: c.max_abs_diff, default=None)
    dtype = planned.options.compute_dtype
    if options.tolerance is not None:
        rule = f"fixed atol {options.tolerance.atol:g}, rtol {options.tolerance.rtol:g}"
    else:
        rtol = mode_tolerance(dtype, 0.0, options.scale).rtol
        rule = f"rtol {rtol:g}, atol {options.scale:g}*rtol*max|ref|"
    return {
        "mode": planned.label,
        **planned.options.describe(),
        "dtype": dtype,
        "tolerance": rule,
        "passed": all(c.passed for c in found),
        "failed": sum(not c.passed for c in found),
        "max_abs_diff": worst.max_abs_diff if worst else 0.0,
        "worst": worst.name.rsplit(":", 1)[-1] if worst else None,
        "seconds": round(seconds, 2),
    }


def _first_failing_hidden_state(label: str, found: list[Comparison]) -> str | None:
    failing = [c for c in found if not c.passed]
    if not failing:
        return None
    hidden = sorted(
        k for c in failing if (k := hidden_state_index(c.name.rsplit(":", 1)[-1])) is not None
    )
    if not hidden:
        return f"{label}: every hidden state agrees; only the final outputs differ."
    k = hidden[0]
    where = layer_text(k, "the embedding output", "the output of layer")
    return f"{label}: first differs from the reference at hidden_states[{k}] ({where})."


def _input_details(batches: Sequence[Batch]) -> dict[str, Any]:
    return {
        "batches": len(batches),
        "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
        "tokens": int(sum(b.attention_mask.sum() for b in batches)),
    }
