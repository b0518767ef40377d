"""The keras-hub side on another Keras backend (``crosscheck keras-hub:<SPEC> --backend
jax|torch``): the backbone runs in a process of its own, started once with
``KERAS_BACKEND`` set, because Keras fixes its backend at import.

Why the conversion stays in this process (on TensorFlow): keras-hub's converter is
recorded while it runs (which Keras variable came from which Hugging Face weight), and
the facts the checks ask of a side (its HF config, tokenizer, limits, layout) are read
off the converted backbone. So the in-process keras-hub side
(:class:`~tfparity.adapters.keras_hub.side.KerasHubModel`) is built as today, its
backbone saved to one ``.keras`` file, and the worker (:mod:`.hub_worker`) loads that
file: the same weights, so the weight hints read off the in-process side's weights
still name the right PyTorch weights. Runs, generation and gradients cross the process boundary.

A causal-LM task (``--head causal-lm``, ``tiny:<type>/causal-lm``, or a checkpoint
whose config names a causal LM) is saved whole: its runs give the task's ``logits``
too, and ``tfparity generate`` drives the task's own ``generate`` in the worker
(:mod:`.remote_generation`).

``tfparity gradients`` differentiates in the worker too (:mod:`.remote_gradients`).

What it cannot do: sub-layer taps and isolated runs (the worker records hidden states
only, so a divergence is localised to a layer, as for other untapped sides) and the
``inputs_embeds`` path (refused by name, exit 2; the gradients check then runs its
TF-vs-PyTorch half only, and says so).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TfparityError
from ...inputs import Batch, check_limits
from ...trace import Trace, hidden_state_index
from ..interfaces.sides import TFSideBase
from ..runtime.execution_options import ExecutionOptions, eager_only
from .launch import BACKENDS, installed, pip_command
from .protocol import Lines
from .workers import ended, environment

START_TIMEOUT_S = 600


def check_backend(backend: str) -> None:
    """An unknown backend, or one not installed, is exit 2 (with its pip command)."""
    if backend not in BACKENDS:
        raise TfparityError(f"unknown backend {backend}: one of {', '.join(BACKENDS)}.")
    if not installed(backend):
        raise TfparityError(f"backend {backend} is not installed: {pip_command(backend)}.")


class _Worker:
    """One long-lived worker process and the directory its files pass through; closed
    when its side is collected or the interpreter exits (:func:`weakref.finalize`)."""

    def __init__(self, backend: str, side: Any) -> None:
        self.backend = backend
        self._dir = tempfile.TemporaryDirectory(prefix=f"tfparity-{backend}-")
        self.root = Path(self._dir.name)
        path = self.root / "model.keras"
        side.model.save(str(path))  # the backbone, or a causal LM's task (its head too)
        self._stderr = open(self.root / "stderr.txt", "w+")  # a file: a pipe could fill
        command = [sys.executable, "-m", "tfparity.adapters.keras_backends.hub_worker", str(path)]
        self.proc = subprocess.Popen(
            command,
            env=environment(backend, ("float32",)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._lines = Lines(self.proc.stdout)  # type: ignore[arg-type]
        self._close = weakref.finalize(self, _close, self.proc, self._stderr, self._dir)
        self.facts = json.loads(self._reply("ready"))
        self.runs = 0

    def _reply(self, expected: str) -> str:
        """The text of the next protocol line; an error line, the process ending, or
        silence past :data:`START_TIMEOUT_S` is a TfparityError naming the backend and
        the worker's reason."""
        try:
            line = self._lines.next(START_TIMEOUT_S)
        except TimeoutError:
            self.proc.kill()
            raise TfparityError(
                f"the {self.backend} backend's process said nothing for {START_TIMEOUT_S} s."
            ) from None
        if line is not None:
            kind, text = line
            if kind == expected:
                return text
            raise TfparityError(f"the keras-hub backbone on the {self.backend} backend: {text}")
        raise ended(self.backend, self.proc, self._stderr)

    def run(self, feed: dict[str, np.ndarray], kind: str = "run") -> dict[str, np.ndarray]:
        """The worker's answer to a ``kind`` request on ``feed`` (:mod:`.hub_worker`):
        for ``run``, the hidden states on ``feed`` by Hugging Face name (a task's
        ``logits`` too); for ``generate``, the greedy ``tokens`` and step ``logits``."""
        self.runs += 1
        given, out = self.root / f"in{self.runs}.npz", self.root / f"out{self.runs}.npz"
        np.savez(given, **feed)
        self.proc.stdin.write(f"{kind} {given} {out}\n".encode())  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        self._reply("done")
        with np.load(out) as held:
            return {k: held[k] for k in held.files}

    def close(self) -> None:
        self._close()


def _close(proc: subprocess.Popen, stderr: Any, directory: Any) -> None:
    """Close stdin (the worker ends on EOF), wait briefly, else kill; drop the files."""
    try:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    stderr.close()
    directory.cleanup()


def remote_keras_hub(local: Any, backend: str) -> RemoteKerasHub:
    """``local`` (an in-process keras-hub side: a backbone, or a causal LM's task) run
    on ``backend`` in a worker process of its own; exit 2 for any other side."""
    check_backend(backend)
    from ..keras_hub.side import KerasHubModel

    if not isinstance(local, KerasHubModel):
        raise TfparityError(
            f"--backend {backend} runs a keras-hub backbone or CausalLM task in a process "
            f"of its own; {local.name} loads as {local.side_kind}, which is not carried to "
            "another backend: use --backend tensorflow."
        )
    worker = _Worker(backend, local)
    facts = worker.facts
    what = "backbone" if facts.get("task") is None else f"{facts['task']} task"
    note = (
        f"keras-hub ran on the {backend} backend (Keras {facts['keras']}, in a process of "
        f"its own, {', '.join(facts['precision'].get('devices', []))}), from the {what} "
        "converted on TensorFlow and saved to .keras: hidden states are compared, a "
        "divergence is localised to a layer (no sub-layer taps across processes)."
    )
    notes = [n for n in local.notes if n != local.how_embeds_run()] + [note]
    return RemoteKerasHub(local, backend, worker, notes, f"{local.name} [{backend}]")


@dataclass
class RemoteKerasHub(TFSideBase):
    """A keras-hub backbone run on a Keras backend in its own process; its facts are
    the in-process side's (``local``), its runs the worker's."""

    local: Any  # the KerasHubModel the backbone was converted into
    backend: str
    worker: _Worker
    notes: list[str] = field(default_factory=list)
    name: str = ""
    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    holdings: Any = None

    # ------------------------------------------------------------------ facts

    @property
    def spec(self) -> Any:
        return self.local.spec

    @property
    def source(self) -> str:
        return f"{self.local.source}, run on the {self.backend} backend"

    @property
    def tokenizer(self) -> Any:
        return self.local.tokenizer

    @property
    def model(self) -> Any:
        return self.local.model  # the TensorFlow twin: the worker's lives in its process

    @property
    def config(self) -> Any:
        return self.local.config

    @property
    def head(self) -> Any:
        return self.local.head

    @property
    def model_type(self) -> str:
        return self.local.model_type

    @property
    def architecture(self) -> Any:
        return self.local.architecture

    @property
    def limits(self) -> Any:
        return self.local.limits

    @property
    def known_difference(self) -> Any:
        return self.local.known_difference

    @property
    def pad_token_id(self) -> int | None:
        return self.local.pad_token_id

    @property
    def headless_reason(self) -> str | None:
        return self.local.headless_reason

    @property
    def quantisation(self) -> str | None:
        return self.local.quantisation

    @property
    def inputs_embeds_reason(self) -> str:
        return (
            f"{self.name} runs on the {self.backend} backend in a process of its own, "
            "which is given token ids only"
        )

    @property
    def framework(self) -> str:
        return f"Keras 3 on {self.backend}"

    @property
    def command_name(self) -> str:
        return f"{self.local.name} --backend {self.backend}"

    @property
    def side_kind(self) -> str:
        what = "backbone" if self.worker.facts.get("task") is None else "CausalLM task"
        return f"a keras-hub {what} on the {self.backend} backend"

    # ------------------------------------------------------------------ runs

    def run(self, batch: Batch, inputs_embeds: Any = None) -> Trace:
        if inputs_embeds is not None:
            raise TfparityError(f"{self.inputs_embeds_reason}.")
        check_limits(batch, self.limits)
        feed = {k: np.asarray(v) for k, v in self.local.inputs(batch).items()}
        got = self.worker.run(feed)
        hidden = sorted((k for k in got if k.startswith("hidden_states[")), key=hidden_state_index)
        if "logits" in got:  # a causal LM's task: its outputs as the in-process task's
            return Trace({k: got[k] for k in [*hidden, "logits"]})
        pooled = ["pooler_output"] if "pooler_output" in got else []
        return Trace({k: got[k] for k in [*hidden, "last_hidden_state", *pooled]})

    def run_gathered(self, batch: Batch) -> Trace:
        raise TfparityError(f"{self.inputs_embeds_reason}.")

    def gather(self, input_ids: np.ndarray) -> Any:
        raise TfparityError(f"{self.inputs_embeds_reason}.")

    def word_embeddings(self) -> Any:
        return self.local.word_embeddings()

    def named_weights(self) -> list[tuple[str, Any]]:
        return self.local.named_weights()

    def output_names(self, reference: Any) -> set[str]:
        return self.local.output_names(reference)

    def gradients(
        self,
        batch: Batch,
        objective: Any,
        *,
        embeds: bool = False,
        embeds_fn: Any = None,
        reference: dict[str, np.ndarray] | None = None,
    ) -> Any:
        """The gradients check's run in the worker (:mod:`.remote_gradients`); the
        inputs_embeds path is refused (token ids only)."""
        from .remote_gradients import remote_gradients

        return remote_gradients(self, batch, objective, embeds or embeds_fn is not None, reference)

    def generator(self) -> Any:
        """The task's greedy generation in the worker
        (:class:`~.remote_generation.RemoteGenerator`); a backbone refuses, as on
        TensorFlow (no LM head)."""
        if self.worker.facts.get("task") is None:
            return self.local.generator()
        from .remote_generation import RemoteGenerator

        return RemoteGenerator(self)

    # ------------------------------------------------------------------ other forms

    def executed(self, options: ExecutionOptions) -> RemoteKerasHub:
        eager_only(options, f"keras-hub models on the {self.backend} backend")
        return self

    def eager(self) -> RemoteKerasHub:
        return self

    def with_reference(self, pt_spec: Any) -> RemoteKerasHub:
        """The in-process side bound to the reference's checkpoint (its tokenizer and
        weight map: the weights are the worker's too); the same worker."""
        bound = self.local.with_reference(pt_spec)
        if bound is self.local:
            return self
        return RemoteKerasHub(bound, self.backend, self.worker, self.notes, self.name)

    def close(self) -> None:
        """End the worker process now (else at exit)."""
        self.worker.close()

    # ------------------------------------------------------------------ weight hints
    # The worker loaded the in-process backbone's weights, so its record of the
    # converter's port_weight calls names the weights the worker computes with.

    def feed_forward(self, layer: int) -> Any:
        return self.local.feed_forward(layer)

    def weights_for(self, pt_weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.local.weights_for(pt_weights)

    def unported(self, pt_weights: dict[str, np.ndarray], prefix: str, contains: str) -> list:
        return self.local.unported(pt_weights, prefix, contains)

    def weight_note(self, name: str) -> str | None:
        return self.local.weight_note(name)
