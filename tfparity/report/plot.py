"""The per-layer divergence plot (PNG, SVG or PDF), drawn with matplotlib (an optional extra).

One row per report that compared hidden states. Left: max and mean absolute
difference per hidden state on a log scale, where a port's error shows up as a jump
(rounding grows smoothly; a bug steps). Right, for the cross-check: each hidden
state's RMSE to the float64 referee (accumulated over the full run), the layer's own
error when fed PyTorch's input (isolated), and PyTorch fp32's RMSE to the referee (the
rounding noise the referee allows a multiple of). The first divergence is marked.

matplotlib is imported lazily with the Agg backend (no display needed), so the report
package stays importable without it; no TF or torch here.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TfparityError
from ..results import Report
from ..trace import hidden_state_index
from . import renderer_for

RED = "#b00020"
INSTALL_HINT = "pip install 'tfparity[plot]' (or: pip install matplotlib)"
# --plot's file extension -> the format matplotlib writes (its Agg backend draws all three).
PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def plot_format(path: str | Path) -> str:
    """The format ``--plot PATH`` writes, read off its extension; any other extension
    is refused (exit 2) naming the ones supported: PNG bytes under ``x.svg`` were written
    before, which no SVG viewer opens."""
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_FORMATS:
        raise TfparityError(
            f"--plot {path}: the extension names the format, and "
            f"{suffix or 'no extension'} is not one tfparity writes; use "
            f"{', '.join(PLOT_FORMATS)}."
        )
    return PLOT_FORMATS[suffix]


def import_matplotlib() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or a TfparityError saying how to get it."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise TfparityError(
            f"--plot needs matplotlib, which is not installed: {INSTALL_HINT}. "
            "(--html works without it, leaving the plot out.)"
        ) from exc
    return plt


def matplotlib_available() -> bool:
    try:
        import_matplotlib()
    except TfparityError:
        return False
    return True


@dataclass(frozen=True)
class LayerSeries:
    """What one report says per hidden state (None where a figure was not measured)."""

    title: str
    passed: bool
    hidden: list[int]
    max_abs: list[float]
    mean_abs: list[float]
    failed: list[bool]
    accumulated: list[float | None]
    isolated: list[float | None]
    reference: list[float | None]
    first_divergence: int | None
    divergence_label: str
    compares: str = "actual vs expected"

    @property
    def has_rmse(self) -> bool:
        return any(v is not None for v in self.accumulated)


def layer_series(report: Report) -> LayerSeries | None:
    """The plottable figures of ``report``: the cross-check's layer table, or any
    check's ``hidden_states[k]`` comparisons; None when it compared no hidden state."""
    rows = report.details.get("layers")
    if renderer_for(report).layer_x_backend:  # tfparity backends: see backend_series
        return None
    if not rows:
        rows = [
            {
                "hidden_state": k,
                "max_abs_diff": c.max_abs_diff,
                "mean_abs_diff": c.mean_abs_diff,
                "passed": c.passed,
            }
            for c in report.comparisons
            if (k := hidden_state_index(c.name)) is not None
        ]
        rows.sort(key=lambda r: r["hidden_state"])
    if not rows:
        return None
    d = report.first_divergence
    label = ""
    if d is not None and d.hidden_state is not None:
        state = "" if d.hidden_state is None else f"hidden_states[{d.hidden_state}] · "
        label = f"first divergence: {state}layer {d.layer}"
        label += f" · {d.component}" if d.component else ""
    return LayerSeries(
        title=f"tfparity {report.check} · {report.model} — {'PASS' if report.passed else 'FAIL'}",
        passed=report.passed,
        hidden=[r["hidden_state"] for r in rows],
        max_abs=[r["max_abs_diff"] for r in rows],
        mean_abs=[r["mean_abs_diff"] for r in rows],
        failed=[not r["passed"] for r in rows],
        accumulated=[r.get("rmse_vs_fp64") for r in rows],
        isolated=[r.get("isolated_rmse") for r in rows],
        reference=[r.get("reference_rmse_vs_fp64") for r in rows],
        first_divergence=d.hidden_state if d is not None else None,
        divergence_label=label,
        compares=str(report.details.get("compares", "actual vs expected")).split(",")[0],
    )


@dataclass(frozen=True)
class BackendSeries:
    """``tfparity backends``: per backend, each layer's RMSE relative to the float64
    referee's RMS (None where not measured) and whether it failed; the ceiling."""

    title: str
    passed: bool
    layers: list[str]
    relative: dict[str, list[float | None]]
    failed: dict[str, list[bool]]
    ceiling: float | None
    first_divergence: int | None
    divergence_label: str


def backend_series(report: Report) -> BackendSeries | None:
    """The plottable figures of a ``tfparity backends`` report (None for any other)."""
    d = report.details
    rows = d.get("layers")
    if not rows or not renderer_for(report).layer_x_backend:
        return None
    names = [r["layer"] for r in rows]
    f = d.get("first_divergence")
    label = ""
    if f and "layer" in f:  # else a quantised run over its budget: no layer parted
        label = f"{'backend ' + f['backend'] if f.get('backend') else 'every backend'}, "
        label += f"layer {f['layer']}"
    return BackendSeries(
        title=f"tfparity {report.check} · {report.model} — {'PASS' if report.passed else 'FAIL'}",
        passed=report.passed,
        layers=names,
        relative={
            b: [(r["backends"].get(b) or {}).get("relative_rmse") for r in rows]
            for b in d["backends"]
        },
        failed={
            b: [not (r["backends"].get(b) or {"passed": True})["passed"] for r in rows]
            for b in d["backends"]
        },
        ceiling=d.get("ceiling"),
        first_divergence=names.index(f["layer"]) if f and f.get("layer") in names else None,
        divergence_label=label,
    )


def plottable(reports: Sequence[Report]) -> list[Report]:
    return [r for r in reports if layer_series(r) is not None or backend_series(r) is not None]


def png_bytes(reports: Sequence[Report]) -> bytes:
    """The plot as PNG bytes (the HTML report embeds these)."""
    return plot_bytes(reports, "png")


def plot_bytes(reports: Sequence[Report], fmt: str) -> bytes:
    """The plot of every report that compared hidden states (or layers across
    backends), as bytes of ``fmt`` (a value of :data:`PLOT_FORMATS`)."""
    series = [s for r in reports if (s := layer_series(r) or backend_series(r)) is not None]
    if not series:
        raise TfparityError("No report compared hidden states, so there is nothing to plot.")
    plt = import_matplotlib()
    fig = plt.figure(figsize=(13, 4.8 * len(series)), dpi=100, layout="constrained")
    rows = fig.subfigures(len(series), 1) if len(series) > 1 else [fig]
    for row, s in zip(rows, series, strict=True):
        row.suptitle(s.title, fontsize=13, weight="bold", color="black" if s.passed else RED)
        if isinstance(s, BackendSeries):
            _backends_panel(row.subplots(1, 1), s)
        elif s.has_rmse:
            left, right = row.subplots(1, 2)
            _diff_panel(left, s)
            _rmse_panel(right, s)
        else:
            _diff_panel(row.subplots(1, 1), s)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt)
    plt.close(fig)
    return buffer.getvalue()


def write_plot(reports: Sequence[Report], path: str | Path) -> None:
    """The plot in the format ``path``'s extension names (:func:`plot_format`)."""
    data = plot_bytes(reports, plot_format(path))
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise TfparityError(f"Cannot write the plot to {path}: {exc.strerror}.") from exc


# ----------------------------------------------------------------------------- drawing


def _floor(values: list[list[float | None]]) -> float:
    """Where exact zeros are drawn: a decade below the smallest positive value."""
    positive = [v for vs in values for v in vs if v is not None and v > 0]
    return min(positive) / 10 if positive else 1e-9


def _mark_failures(ax, points: list, **style) -> None:
    """A red cross on each failing ``(x, value)`` point (none: nothing drawn)."""
    if points:
        ax.plot(
            [x for x, _ in points],
            [v for _, v in points],
            linestyle="none",
            marker="X",
            markersize=11,
            color=RED,
            **style,
        )


def _draw(ax, x, values, floor, **style) -> None:
    """A log-scale line; exact zeros go on the floor as hollow triangles."""
    pts = [(h, v) for h, v in zip(x, values, strict=True) if v is not None]
    if not pts:
        return
    xs = [h for h, _ in pts]
    ys = [v if v > 0 else floor for _, v in pts]
    ax.plot(xs, ys, **style)
    zeros = [h for h, v in pts if v == 0]
    if zeros:
        ax.plot(
            zeros,
            [floor] * len(zeros),
            linestyle="none",
            marker="v",
            markersize=9,
            markerfacecolor="white",
            markeredgecolor=style.get("color", "black"),
        )


def _decorate(ax, s: LayerSeries, floor: float, ylabel: str, zero_note: bool) -> None:
    ax.set_yscale("log")
    ax.set_xticks(s.hidden)
    ax.set_xticklabels(["emb" if k == 0 else str(k) for k in s.hidden])
    ax.set_xlabel("hidden state (emb = embedding output, k = output of layer k-1)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if zero_note:  # room below the floor for the hollow triangles
        ax.set_ylim(bottom=floor / 3)
    if s.first_divergence is not None and s.first_divergence in s.hidden:
        ax.axvline(s.first_divergence, color=RED, linestyle="--", linewidth=1.2)
        ax.plot([], [], color=RED, linestyle="--", label=s.divergence_label)
        right_half = s.first_divergence > (s.hidden[0] + s.hidden[-1]) / 2
        ax.text(
            s.first_divergence + (-0.1 if right_half else 0.1),
            0.97,
            "first divergence\n" + s.divergence_label.split(" · ", 1)[-1],
            transform=ax.get_xaxis_transform(),  # x in data, y in axes fraction
            ha="right" if right_half else "left",
            va="top",
            fontsize=9,
            color=RED,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        )
    if zero_note:
        ax.plot(
            [],
            [],
            linestyle="none",
            marker="v",
            markerfacecolor="white",
            markeredgecolor="grey",
            label="exactly 0 (drawn at the axis floor)",
        )
    # Below the axes: a legend inside would hide the points it explains.
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)


def _diff_panel(ax, s: LayerSeries) -> None:
    floor = _floor([s.max_abs, s.mean_abs])
    _draw(ax, s.hidden, s.max_abs, floor, color="#1f77b4", marker="o", label="max abs diff")
    _draw(ax, s.hidden, s.mean_abs, floor, color="#2ca02c", marker="s", label="mean abs diff")
    bad = [
        (h, v if v > 0 else floor)
        for h, v, f in zip(s.hidden, s.max_abs, s.failed, strict=True)
        if f
    ]
    _mark_failures(ax, bad, label="hidden state fails")
    zero = any(v == 0 for v in s.max_abs + s.mean_abs)
    if all(v == 0 for v in s.max_abs):
        ax.text(
            0.5,
            0.6,
            "identical: the difference is exactly 0 at every hidden state",
            transform=ax.transAxes,
            ha="center",
            fontsize=11,
            color="#0a7d2c",
        )
    _decorate(ax, s, floor, "absolute difference", zero)
    ax.set_title(f"absolute difference: {s.compares}", fontsize=10)


def _rmse_panel(ax, s: LayerSeries) -> None:
    floor = _floor([s.accumulated, s.isolated, s.reference])
    _draw(
        ax,
        s.hidden,
        s.accumulated,
        floor,
        color="#d62728",
        marker="o",
        label="accumulated: TF full run, RMSE to fp64",
    )
    _draw(
        ax,
        s.hidden,
        s.isolated,
        floor,
        color="#9467bd",
        marker="D",
        label="isolated: TF layer fed PyTorch's input (worst sub-layer)",
    )
    _draw(
        ax,
        s.hidden,
        s.reference,
        floor,
        color="grey",
        linestyle="--",
        marker=".",
        label="PyTorch fp32, RMSE to fp64 (rounding noise)",
    )
    values = [v for v in s.accumulated + s.isolated + s.reference if v is not None]
    _decorate(ax, s, floor, "RMSE", any(v == 0 for v in values))
    ax.set_title("error vs the float64 referee: accumulated vs isolated", fontsize=10)


_BACKEND_STYLE = {
    "tensorflow": {"color": "#ff7f0e", "marker": "o"},
    "jax": {"color": "#1f77b4", "marker": "s"},
    "torch": {"color": "#2ca02c", "marker": "D"},
}


def _backends_panel(ax, s: BackendSeries) -> None:
    """Each backend's relative RMSE to the float64 referee by layer (log scale), the
    ceiling no backend may pass, failing cells crossed and the first divergence marked."""
    x = list(range(len(s.layers)))
    floor = _floor(list(s.relative.values()))
    for backend, values in s.relative.items():
        style = _BACKEND_STYLE.get(backend, {"marker": "."})
        _draw(ax, x, values, floor, label=backend, **style)
        bad = [
            (i, v if v else floor)
            for i, (v, f) in enumerate(zip(values, s.failed[backend], strict=True))
            if f and v is not None
        ]
        _mark_failures(ax, bad)
    if any(any(f) for f in s.failed.values()):
        ax.plot([], [], linestyle="none", marker="X", color=RED, label="fails")
    if s.ceiling:
        ax.axhline(
            s.ceiling, color="black", linestyle=":", linewidth=1.2, label=f"ceiling {s.ceiling:g}"
        )
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(s.layers, rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("layer (topological order)")
    ax.set_ylabel("RMSE / referee RMS")
    ax.grid(True, which="major", alpha=0.3)
    if s.first_divergence is not None:
        ax.axvline(s.first_divergence, color=RED, linestyle="--", linewidth=1.2)
        ax.plot([], [], color=RED, linestyle="--", label=f"first divergence: {s.divergence_label}")
    ax.set_title("each backend's error to the float64 referee, by layer", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3, frameon=False)
