"""The Ray engine of the sweep (``tfparity sweep --engine ray``).

One Ray actor per worker loads the model once (TF, PyTorch, LM head), exactly as a
single-process sweep does. The driver reads and tokenizes the corpus and buckets it
with the same code as a single process (:func:`~tfparity.sweep.setup.padded_stream`),
so every worker gets the same batches a serial run would make, and deals
them out a chunk at a time: each actor holds at most ``in_flight`` chunks, and a new
one goes to whichever actor finishes first (dynamic balancing, not a fixed modulo).
Records come back as chunks finish and the driver alone writes ``results.jsonl``
(flushed per line) and ``summary.json``, so ``--resume``, ``merge`` and the reports
work unchanged.

A chunk's records are written only when the whole chunk has come back, once. When an
actor dies (node lost, out of memory, ``ray.kill``), its unfinished chunks go back to
the front of the queue for the surviving actors: no item is lost, none duplicated.
When every actor is gone the sweep stops (exit 1, finished items kept: ``--resume``).

Without ``address`` Ray starts a local cluster (``ray.init()``); with one it joins that
cluster. The driver's import path travels to the workers (``runtime_env`` env var
``PYTHONPATH``) when tfparity is imported from a source tree rather than installed.
"""

from __future__ import annotations

import gc
import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import TfparityError
from .corpus import Item
from .options import SweepOptions
from .setup import Encoding, SweepSetup, padded_stream

RAY_EXTRA = "pip install 'tfparity[ray]'"


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide to run: ``address`` of a running cluster (None: start a local
    one), ``workers`` actors, each holding ``gpus_per_worker`` GPUs and
    ``cpus_per_worker`` CPUs (also its TF/PyTorch thread count). ``chunk_batches``
    batches per task, ``in_flight`` tasks queued per actor."""

    address: str | None = None
    workers: int = 2
    gpus_per_worker: float = 0.0
    cpus_per_worker: int = 1
    chunk_batches: int = 1
    in_flight: int = 2

    def check(self) -> None:
        if self.workers < 1:
            raise TfparityError(f"--workers must be at least 1 (got {self.workers}).")
        if self.gpus_per_worker < 0:
            raise TfparityError(
                f"--gpus-per-worker must not be negative (got {self.gpus_per_worker})."
            )
        if self.cpus_per_worker < 1:
            raise TfparityError(
                f"--cpus-per-worker must be at least 1 (got {self.cpus_per_worker})."
            )


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise TfparityError(
            f"--engine ray needs Ray, which is not installed: {RAY_EXTRA} (the 'ray' "
            "extra), or sweep without --engine ray (one process; --shard K/N and merge "
            "split a corpus by hand)."
        ) from exc
    return ray


def worker_env() -> dict[str, str]:
    """``PYTHONPATH`` for the workers: the driver's own, plus the source tree tfparity
    was imported from when it is not an installed package (site-packages), so workers
    import the same tfparity. An installed tfparity adds nothing."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    root = str(Path(__file__).resolve().parents[2])  # above tfparity/sweep/ray_engine.py
    installed = any(x in Path(root).parts for x in ("site-packages", "dist-packages"))
    if not installed and root not in parts:
        parts.insert(0, root)
    return {"PYTHONPATH": os.pathsep.join(parts)} if parts else {}


def _limit_threads(n: int) -> None:
    """Hold TF and PyTorch in this process to ``n`` threads (before either runs)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    import tensorflow as tf

    from ..adapters.runtime.imports import torch_available

    tf.config.threading.set_intra_op_parallelism_threads(n)
    tf.config.threading.set_inter_op_parallelism_threads(n)
    if torch_available():
        import torch

        torch.set_num_threads(n)


class _Worker:
    """One actor: the model loaded once, batches run on request."""

    def __init__(self, threads: int) -> None:
        _limit_threads(threads)
        self.setup: Any = None  # a SweepSetup, once loaded

    def load(
        self, model: str, checks: tuple, pt: Any, options: SweepOptions, execution: Any
    ) -> tuple[Encoding, str | None]:
        self.setup = SweepSetup.load(model, checks, pt, options, execution)
        # This process is the actor's alone and keeps what it loaded to its end: frozen,
        # the framework objects it loaded are not rescanned by each full collection.
        gc.freeze()
        return self.setup.encoding(), self.setup.top1_note

    def run(self, chunk: list) -> list[list[dict]]:
        return [self.setup.run_batch(padded) for padded in chunk]

    def facts(self) -> dict:
        return self.setup.run_facts()


@dataclass
class RayEngine:
    """The driver's side: actors, the queue of chunks, the records as they come back.
    A :class:`~tfparity.sweep.engine.SweepEngine`."""

    ray: Any
    actors: list
    options: SweepOptions
    encoding: Encoding
    top1_note: str | None
    started_ray: bool
    retried_chunks: int = 0
    lost_actors: int = 0
    # The chunks dealt and not yet back: task ref -> (actor, chunk).
    pending: dict[Any, tuple[Any, list]] = field(default_factory=dict, repr=False)

    @classmethod
    def start(
        cls, model: Any, checks: tuple[str, ...], pt: Any, options: SweepOptions, execution: Any
    ) -> RayEngine:
        ray_options: RayOptions = options.engine
        ray_options.check()
        if not isinstance(model, str) or not (pt is None or isinstance(pt, str)):
            raise TfparityError(
                "--engine ray loads the model in each worker: give MODEL (and pt) as a "
                "MODEL spec, not an object in memory."
            )
        ray = import_ray()
        started = not ray.is_initialized()
        if started:
            kwargs: dict[str, Any] = {
                "runtime_env": {"env_vars": worker_env()},
                "log_to_driver": False,
                "include_dashboard": False,
            }
            if ray_options.address:
                ray.init(address=ray_options.address, **kwargs)
            else:
                need = ray_options.workers * ray_options.cpus_per_worker
                ray.init(num_cpus=max(os.cpu_count() or 1, need), **kwargs)
        remote = ray.remote(_Worker).options(
            num_cpus=ray_options.cpus_per_worker,
            num_gpus=ray_options.gpus_per_worker,
            max_restarts=0,
        )
        actors = [remote.remote(ray_options.cpus_per_worker) for _ in range(ray_options.workers)]
        local = replace(options, engine=None, progress="none")
        try:
            loaded = ray.get([a.load.remote(model, checks, pt, local, execution) for a in actors])
        except Exception as exc:
            cls._shutdown(ray, actors, started)
            raise _cause(ray, exc) from None
        encoding, note = loaded[0]
        return cls(ray, actors, options, encoding, note, started)

    def records(self, items: Iterator[Item]) -> Iterator[list[dict]]:
        """Records per finished batch (or per item too long to run), as chunks return."""
        ray, opts = self.ray, self.options.engine
        queue: deque[list] = deque()
        pending = self.pending
        load = {id(a): 0 for a in self.actors}
        stream = padded_stream(self.encoding, items, self.options)
        exhausted = False
        chunk: list = []
        while True:
            # Fill the queue up to what the actors can take, reading the corpus lazily.
            while not exhausted and len(queue) < len(self.actors) * opts.in_flight:
                unit = next(stream, None)
                if unit is None:
                    exhausted = True
                    if chunk:
                        queue.append(chunk)
                        chunk = []
                elif isinstance(unit, list):
                    yield unit  # an item too long to run: recorded here
                else:
                    chunk.append(unit)
                    if len(chunk) == opts.chunk_batches:
                        queue.append(chunk)
                        chunk = []
            for actor in self.actors:
                while queue and load[id(actor)] < opts.in_flight:
                    work = queue.popleft()
                    pending[actor.run.remote(work)] = (actor, work)
                    load[id(actor)] += 1
            if not pending:
                return
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            actor, work = pending.pop(ref)
            load[id(actor)] -= 1
            try:
                results = ray.get(ref)
            except ray.exceptions.RayActorError:
                self._lose(actor, work, pending, queue, load)
                continue
            except Exception as exc:
                raise _cause(ray, exc) from None
            yield from results

    def busy_actors(self) -> list:
        """The actors holding chunks not yet back, the one dealt the oldest first."""
        return list(dict.fromkeys(actor for actor, _ in self.pending.values()))

    def _lose(self, actor: Any, work: list, pending: dict, queue: deque, load: dict) -> None:
        """An actor died: its chunks (this one and any queued on it) go back first."""
        if actor in self.actors:
            self.actors.remove(actor)
            self.lost_actors += 1
        queue.appendleft(work)
        self.retried_chunks += 1
        for ref in [r for r, (a, _) in pending.items() if a is actor]:
            _, other = pending.pop(ref)
            queue.appendleft(other)
            self.retried_chunks += 1
        load.pop(id(actor), None)
        if not self.actors:
            raise TfparityError(
                "Every Ray worker of the sweep died; the items finished so far are in "
                "results.jsonl: continue with --resume."
            )

    def run_facts(self) -> dict:
        per_actor = self.ray.get([a.facts.remote() for a in self.actors])
        facts = dict(per_actor[0])
        facts["traces"] = sum(f["traces"] for f in per_actor)
        paths: dict[str, int] = {}
        for f in per_actor:
            for path, n in (f.get("traces_by_path") or {}).items():
                paths[path] = paths.get(path, 0) + n
        facts["traces_by_path"] = paths
        referees = [f["referee"] for f in per_actor if f.get("referee")]
        if referees:
            facts["referee"] = {
                k: (v if isinstance(v, str) else sum(r[k] for r in referees))
                for k, v in referees[0].items()
            }
        opts = self.options.engine
        facts["engine"] = {
            "name": "ray",
            "address": opts.address or "local",
            "workers": opts.workers,
            "gpus_per_worker": opts.gpus_per_worker,
            "cpus_per_worker": opts.cpus_per_worker,
            "workers_lost": self.lost_actors,
            "chunks_rerun": self.retried_chunks,
        }
        return facts

    def close(self) -> None:
        self._shutdown(self.ray, self.actors, self.started_ray)

    @staticmethod
    def _shutdown(ray: Any, actors: list, started: bool) -> None:
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # already gone
                pass
        if started:
            ray.shutdown()


def _cause(ray: Any, exc: Exception) -> Exception:
    """A worker's own exception (a TfparityError stays one: exit 2 with its message)."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = exc.cause if getattr(exc, "cause", None) is not None else None
        if isinstance(cause, Exception):
            return cause
    return exc
