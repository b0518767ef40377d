"""Weights a PyTorch checkpoint holds under names transformers' TF class does not use.

DeBERTa-v2 with ``share_att_key=false`` gives each attention layer projections of its
own for the relative positions: ``pos_key_proj`` and ``pos_query_proj`` in PyTorch,
``pos_proj`` and ``pos_q_proj`` in TF (the registry's ``Architecture.tf_renamed``).
Loading by name leaves the checkpoint's projections unread and TF's random, and the
outputs differ by only ~5e-6 on short inputs. Unread body weights read as a config.json
smaller than its checkpoint (exit 2); here the cause is known and is named instead, as
the cross-check's finding on the weights the port lacks.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...architectures import for_config
from ..sources.holdings import Holdings, listed


def _segments(name: str) -> set[str]:
    return set(name.split("."))


def renamed_gaps(config: Any, class_name: str, holdings: Holdings) -> Holdings:
    """``holdings`` with the checkpoint's weights that the TF class names otherwise taken
    out of the unused ones (they are not a config mismatch) and the cause recorded."""
    renamed = for_config(config).tf_renamed
    hits = [r for r in renamed if any(r.pt in _segments(n) for n in holdings.unused)]
    if not hits:
        return holdings
    unread = sorted(n for n in holdings.unused if any(r.pt in _segments(n) for r in hits))
    names = "; ".join(f"{r.what}: {r.tf!r} in TF, {r.pt!r} in PyTorch" for r in hits)
    cause = (
        f"{class_name} names some weights otherwise than the PyTorch checkpoint ({names}), "
        f"so the checkpoint's {listed(unread, 4)} did not load and TF's were left random"
    )
    rest = tuple(n for n in holdings.unused if n not in unread)
    return replace(holdings, unused=rest, causes=(*holdings.causes, cause))
