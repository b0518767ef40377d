"""The per-layer error growth table of a side judged by budgets (a quantised model):
where its error comes from. Reads Report.details only; no numpy, no frameworks."""

from __future__ import annotations

_HEADER = ("hidden", "layer", "relative error", "added", "growth")


def growth_table(rows: list[dict]) -> list[str]:
    """One row per hidden state: its error relative to the reference's size, what its
    layer added to its input's, and by how many times it grew (the worst is marked)."""
    worst = max((r["added"] for r in rows), default=None)
    body = [
        (
            str(r["hidden_state"]),
            str(r["layer"]),
            f"{r['relative_error']:.3g}",
            f"{r['added']:+.3g}" + (" <- worst" if r["added"] == worst else ""),
            "-" if r["growth"] is None else f"x{r['growth']:.3g}",
        )
        for r in rows
    ]
    widths = [max(len(x[i]) for x in [_HEADER, *body]) for i in range(len(_HEADER))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return ["error growth (relative to the reference's RMS):"] + [
        fmt.format(*_HEADER).rstrip(),
        *(fmt.format(*r).rstrip() for r in body),
    ]


_ERRORS_HEADER = ("tensor", "MSE", "SNR dB")


def tensor_error_table(rows: list[dict]) -> list[str]:
    """MSE and SNR per tensor, the figures ai-edge-quantizer's ``validate()`` gives (the
    cosine is the main table's), lowest SNR first."""
    ordered = sorted(rows, key=lambda r: r["snr_db"])
    body = [(r["name"], f"{r['mse']:.3g}", f"{r['snr_db']:.1f}") for r in ordered]
    widths = [max(len(x[i]) for x in [_ERRORS_HEADER, *body]) for i in range(3)]
    fmt = "  ".join(("{:<%d}" if i == 0 else "{:>%d}") % w for i, w in enumerate(widths))
    return ["per tensor (ai-edge-quantizer's figures, lowest SNR first):"] + [
        fmt.format(*_ERRORS_HEADER).rstrip(),
        *(fmt.format(*r).rstrip() for r in body),
    ]
