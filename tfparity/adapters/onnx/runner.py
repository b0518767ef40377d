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
from ..exported.litert_runner import INPUT_ROLES, cut, feed, hf_name, refuse_padding
from .cache import Cache, cache_of, is_past, is_present
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
    # the KV cache a causal LM graph takes and returns; None: it takes none. A plain run
    # feeds it empty (length 0); its present outputs are no model output (output_names)
    cache: Cache | None = None
    device: str | None = None  # --device: the providers (session.providers); None: CUDA's first

    @classmethod
    def open(
        cls,
        path: Path,
        graph: Graph,
        pad_id: int | None,
        config: Any = None,
        device: str | None = None,
    ) -> Runner:
        """The file's deployed session and its inputs' roles; ``config`` (Hugging Face's)
        gives a cache's heads where the graph leaves them dynamic."""
        session = open_session(str(path), path, True, device)  # what it refuses first
        inputs: dict[str, str] = {}
        for i in graph.inputs:
            if is_past(i.name):  # the cache's: fed empty, or by the generator
                continue
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
        cache = cache_of(graph.inputs, graph.outputs, config)
        return cls(
            path, graph, inputs, dtypes, static, pad_id or 0, session, cache=cache, device=device
        )  # type: ignore[arg-type]

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
        """The model's outputs by Hugging Face name: not the cache's (``present.*``,
        which :meth:`run` returns too, for the kernel sets to compare)."""
        return [hf_name(n) for n in self.graph.outputs if not is_present(n)]

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
        refuse_padding(
            batch, self.inputs, seq, str(self.path), "Export it with a dynamic sequence axis"
        )
        names = [hf_name(n) for n in self.graph.outputs]
        outs: list[dict[str, np.ndarray]] = []
        kept: list[dict[str, np.ndarray]] = []
        for start in range(0, b, rows):
            n = min(rows, b - start)
            feed = self._feed(batch, start, n, rows, seq)
            raw = self._call(self.session, None, feed)
            outs.append({k: _cut(k, v, n, s) for k, v in zip(names, raw, strict=True)})
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

    def _feed(self, batch: Batch, start: int, n: int, rows: int, seq: int) -> dict[str, Any]:
        if "positions" in self.inputs and batch.position_ids is None:
            batch = replace(batch, position_ids=_positions(batch.input_ids.shape, 0))
        fed = feed(batch, self.inputs, self.pad_id, slice(start, start + n), (rows, seq))
        if self.cache is not None:  # no past: the graph computes as one without a cache
            fed.update(self.cache.empty(rows))
        return {name: x.astype(self.dtypes[name]) for name, x in fed.items()}

    # ------------------------------------------------------------------ the cache

    def step(
        self, input_ids: np.ndarray, past: dict[str, np.ndarray], done: int
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One cached step on the deployed session: ``input_ids`` [1, n] after ``done``
        tokens whose keys and values ``past`` holds (empty for the prefill). The logits
        [1, n, vocab] and the past for the next step (the graph's present outputs)."""
        assert self.cache is not None
        ids = np.asarray(input_ids)
        parts = {
            "ids": ids,
            "mask": np.ones((ids.shape[0], done + ids.shape[1]), ids.dtype),
            "positions": _positions(ids.shape, done),
            "types": np.zeros_like(ids),
        }
        fed = {name: parts[role] for role, name in self.inputs.items() if role in parts}
        fed = {name: np.asarray(x).astype(self.dtypes[name]) for name, x in fed.items()}
        wanted = ["logits", *self.cache.outputs]
        logits, *presents = self._call(self.session, wanted, {**fed, **past})
        return logits, self.cache.carried(dict(zip(self.cache.outputs, presents, strict=True)))


def _cut(name: str, x: np.ndarray, n: int, s: int) -> np.ndarray:
    """An output cut back to the batch (:func:`~..exported.litert_runner.cut`); a present
    key or value ``[batch, heads, sequence, head_dim]`` by its rows only (its sequence
    is the past's and the batch's, and a cache graph is dynamic: nothing padded)."""
    return np.array(x[:n]) if is_present(name) else cut(name, x, n, s)


def _positions(shape: tuple[int, ...], done: int) -> np.ndarray:
    """Position ids ``done``, ``done + 1``, ... for each row: a Hugging Face model's own
    where it is given none (after ``done`` cached tokens)."""
    rows, n = shape[0], shape[1]
    return np.broadcast_to(np.arange(done, done + n), (rows, n)).copy()
