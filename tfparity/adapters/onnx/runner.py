"""Running an ONNX file: its inputs fed by the graph's input names, a batch padded to the
graph's static shapes where it has them, its outputs cut back to the batch.

Two sessions, as the report says: the file as deployed (ONNX Runtime's default
optimisation, fusions on) for the graph's outputs, and, made only when hidden states or
sub-layers must be read from inside the graph, a copy with every intermediate tensor
marked as an output and optimisation off (:meth:`.graph.Graph.marked`).

Padding and chunking follow the LiteRT runner (:mod:`..exported.litert_runner`): a
static ``[batch, seq]`` is filled with the pad id under a zero mask and extra rows
repeat the first, and every tensor is cut back before it reaches a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TfparityError
from ...inputs import Batch
from ..exported.litert_runner import INPUT_ROLES, cut, feed, hf_name
from .graph import Graph
from .session import open_session


@dataclass
class Runner:
    """One ONNX file's sessions, with the roles of its inputs."""

    path: Path
    graph: Graph
    inputs: dict[str, str]  # role -> graph input name
    dtypes: dict[str, str]  # graph input name -> numpy dtype
    static: tuple[int | None, int | None]  # [batch, seq]; None where dynamic
    pad_id: int
    session: Any = field(repr=False)
    _marked: Any = field(default=None, repr=False)
    device: str | None = None  # --device: the providers (session.providers); None: CUDA's first

    @classmethod
    def open(
        cls, path: Path, graph: Graph, pad_id: int | None, device: str | None = None
    ) -> Runner:
        session = open_session(str(path), path, True, device)  # what it refuses first
        inputs: dict[str, str] = {}
        for i in graph.inputs:
            role = next((r for r, names in INPUT_ROLES.items() if i.name in names), None)
            if role is None:
                raise TfparityError(
                    f"{path} takes an input '{i.name}', which tfparity does not know; it "
                    f"feeds {', '.join(n for ns in INPUT_ROLES.values() for n in ns)}."
                )
            inputs[role] = i.name
        if "ids" not in inputs:
            raise TfparityError(f"{path} takes no token ids (input_ids): it is not a text model.")
        ids = next(i for i in graph.inputs if i.name == inputs["ids"])
        static = (tuple(ids.dims[:2]) + (None, None))[:2]
        dtypes = {i.name: i.dtype for i in graph.inputs}
        return cls(path, graph, inputs, dtypes, static, pad_id or 0, session, None, device)  # type: ignore[arg-type]

    def reopened(self, graph: Graph, session: Any, marked: Any = None) -> Runner:
        """The same inputs fed to another session: of the file under other options, or
        of a rewritten copy (``graph``), as ``tfparity runtimes`` opens one per kernel
        set; ``marked``, the session intermediates are read from (None: made from
        ``graph`` when first needed)."""
        return replace(self, graph=graph, session=session, _marked=marked)

    def on(self, device: str | None) -> Runner:
        """The same file on the providers ``device`` asks for (``--device``): its
        session made again, the marked one when first needed."""
        session = open_session(str(self.path), self.path, True, device)
        return replace(self, session=session, _marked=None, device=device)

    @property
    def dynamic(self) -> bool:
        return self.static == (None, None)

    def output_names(self) -> list[str]:
        return [hf_name(n) for n in self.graph.outputs]

    def run(
        self, batch: Batch, read: tuple[str, ...] = ()
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The graph's outputs (Hugging Face names) from the optimised session, and the
        intermediate tensors ``read`` names from the marked, unoptimised one; both cut
        back to the batch."""
        if batch.position_ids is not None and "positions" not in self.inputs:
            raise TfparityError(f"{self.path} takes no position ids; leave them out.")
        b, s = batch.input_ids.shape
        rows, seq = self.static[0] or b, self.static[1] or s
        if s > seq:
            raise TfparityError(
                f"{self.path} takes sequences of {seq} tokens at most (its static shape); "
                f"this batch has {s}. Give --seq-len {seq} or shorter texts."
            )
        self._refuse_padding(batch, seq)
        names = [hf_name(n) for n in self.graph.outputs]
        outs: list[dict[str, np.ndarray]] = []
        kept: list[dict[str, np.ndarray]] = []
        for start in range(0, b, rows):
            n = min(rows, b - start)
            feed = self._feed(batch, start, n, rows, seq)
            raw = self._call(self.session, None, feed)
            outs.append({k: cut(k, v, n, s) for k, v in zip(names, raw, strict=True)})
            if read:
                values = self._call(self.marked(), list(read), feed)
                kept.append({k: cut("", v, n, s) for k, v in zip(read, values, strict=True)})
        joined = {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
        return joined, {k: np.concatenate([c[k] for c in kept]) for k in read}

    def _call(self, session: Any, names: list[str] | None, feed: dict[str, Any]) -> list[Any]:
        """One session run; what ONNX Runtime refuses at run time is exit 2, named."""
        try:
            return session.run(names, feed)
        except Exception as exc:  # ONNX Runtime raises its own classes, one per status code
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TfparityError(
                f"ONNX Runtime failed running {self.path} on inputs "
                f"{', '.join(f'{k} {list(v.shape)}' for k, v in feed.items())}: {first}"
            ) from None

    def marked(self) -> Any:
        """The session of the copy with every intermediate marked, optimisation off."""
        if self._marked is None:
            names = [p.name for p in self.graph.produced]
            self._marked = open_session(self.graph.marked(names), self.path, False, self.device)
        return self._marked

    def _refuse_padding(self, batch: Batch, seq: int) -> None:
        """Exit 2 where padding would reach a graph with no mask input to exclude it."""
        if "mask" in self.inputs:
            return
        if not batch.attention_mask.all():
            raise TfparityError(
                f"{self.path} takes no attention mask, and this batch holds padding; give "
                "batches without padding, each of one length."
            )
        if batch.input_ids.shape[1] < seq:
            raise TfparityError(
                f"{self.path} takes no attention mask and exactly {seq} tokens (its static "
                "shape): shorter sequences would be padded and the padding attended to. "
                "Export it with a dynamic sequence axis or an attention_mask input."
            )

    def _feed(self, batch: Batch, start: int, n: int, rows: int, seq: int) -> dict[str, Any]:
        fed = feed(batch, self.inputs, self.pad_id, slice(start, start + n), (rows, seq))
        return {name: x.astype(self.dtypes[name]) for name, x in fed.items()}
