"""The second referee of ``tfparity backends`` for a keras-hub port: Hugging Face
PyTorch at float64 (as ``crosscheck`` builds it), on the same inputs (numpy only).

Each backend's outputs of the backbone layers that hold Hugging Face's hidden states
(named by the preparing process) are judged against HF's by the same rule as against the
Keras float64 referee (:func:`tfparity.cross_backend.judge.check_backends`), the other
backends standing in as the float32 reference and the ceiling catching what every
backend shares: a port that differs from Hugging Face on every backend fails as ``all``,
naming the hidden state and its layer. Padded positions are zeroed on both sides (HF
and keras-hub need not agree where the mask hides a token).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..compare.judge import Referee
from ..results import Report
from .judge import BackendOutputs, check_backends


@dataclass(frozen=True)
class HFReferee:
    """HF's float64 outputs by HF name, the backbone layer holding each, and the mask."""

    label: str
    truth: Mapping[str, np.ndarray]
    layers: Mapping[str, str]
    mask: np.ndarray | None = None


def _masked(array: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """``array`` with padded positions zeroed, where its first two axes are the mask's."""
    if mask is None or np.ndim(array) < 2 or np.shape(array)[:2] != np.shape(mask):
        return np.asarray(array)
    keep = np.reshape(mask, (*np.shape(mask), *([1] * (np.ndim(array) - 2))))
    return np.where(keep != 0, array, 0)


def _name(hf_name: str, layer: str) -> str:
    return f"{hf_name} ({layer})"


def check_against_hf(
    outputs: BackendOutputs, hf: HFReferee, referee: Referee, ceiling: float
) -> Report:
    """Every backend against Hugging Face at every hidden state the backends recorded."""
    recorded = set.intersection(*(set(run) for run in outputs.float32.values()))
    pairs = {n: layer for n, layer in hf.layers.items() if n in hf.truth and layer in recorded}
    # A hidden state that no layer outputs (Gemma scales its embeddings with an op
    # between layers) has no recording to judge: said, not silently passed.
    unrecorded = [f"{n} ({hf.layers[n]})" for n in hf.layers if n in hf.truth and n not in pairs]
    truth = {_name(n, layer): _masked(hf.truth[n], hf.mask) for n, layer in pairs.items()}
    float32 = {
        backend: {
            _name(n, layer): _masked(run[layer], hf.mask)
            for n, layer in pairs.items()
            if layer in run
        }
        for backend, run in outputs.float32.items()
    }
    against = BackendOutputs(
        model=outputs.model,
        float32=float32,
        truth=truth,
        referee_backend="torch",
        referee_label=hf.label,
        precision=outputs.precision,
        layer_facts={
            b: {_name(n, layer): facts[layer] for n, layer in pairs.items() if layer in facts}
            for b, facts in outputs.layer_facts.items()
        },
    )
    report = check_backends(against, referee, ceiling)
    if unrecorded:
        report.notes.append(
            f"not compared with {hf.label}: {', '.join(unrecorded)}, computed by an op "
            "between layers, not a layer's output (its effect shows in the next layer)"
        )
    return report


def with_hf(report: Report, hf_report: Report, label: str) -> Report:
    """``report`` (against the Keras float64 referee) with the HF section added: its
    details under ``details["hf_referee"]``, its comparisons appended, the verdict both
    must pass, and the first divergence the Keras one, else HF's."""
    d = hf_report.details
    report.details["hf_referee"] = {
        "referee": {"label": label, "framework": "torch", "dtype": "float64"},
        "layers": d["layers"],
        "first_divergence": d["first_divergence"],
    }
    report.comparisons += hf_report.comparisons
    report.notes += hf_report.notes
    if report.passed and not hf_report.passed:
        report.first_divergence = hf_report.first_divergence
        report.details["first_divergence"] = d["first_divergence"]
    report.passed = report.passed and hf_report.passed
    return report
