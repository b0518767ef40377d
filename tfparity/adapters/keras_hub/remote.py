"""The keras-hub side on another Keras backend (``crosscheck``/``generate``/``gradients
keras-hub:<SPEC> --backend jax|torch``): the same :class:`~.side.KerasHubModel`, whose
forward strategy (:mod:`.forward`) is :class:`InWorker`: its forward pass, gradients and
generation computed in a backend's serving worker
(:class:`~tfparity.adapters.keras_backends.workers.ServingWorker`, started once with
``KERAS_BACKEND`` set, because Keras fixes its backend at import), the one worker stack
that ``tfparity backends`` runs on too.

Why the conversion stays in this process (on TensorFlow): keras-hub's converter is
recorded while it runs (which Keras variable came from which Hugging Face weight), and
the facts the checks ask of a side (its HF config, tokenizer, limits, layout) are read
off the converted backbone. So the side is built as in process, its backbone saved to
one ``.keras`` file, and the worker loads that file (its ``load`` request,
:mod:`~tfparity.adapters.keras_backends.hub_worker`): the same weights, so the weight
hints read off the side's weights still name the right PyTorch weights.

A causal-LM task (``--head causal-lm``, ``tiny:<type>/causal-lm``, or a checkpoint whose
config names a causal LM) is saved whole: its runs give the task's ``logits`` too, and
``tfparity generate`` drives the task's own ``generate`` in the worker
(:class:`RemoteGenerator`). ``tfparity gradients`` differentiates in the worker too.

What it cannot do: sub-layer taps and isolated runs (the worker records hidden states
only, so a divergence is localised to a layer, as for other untapped sides) and the
``inputs_embeds`` path (refused by name, exit 2; the gradients check then runs its
TF-vs-PyTorch half only, and says so).
"""

from __future__ import annotations

import json
import tempfile
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import TfparityError
from ...inputs import Batch
from ...trace import Trace, hidden_state_index
from ..interfaces.decoding import CAUSAL_DECODING, recomputed_logits, teacher_forced_pass
from ..interfaces.gradients import GradientRun, Objective
from ..interfaces.greedy import GreedyRun
from ..interfaces.sides import ForwardPass
from ..keras_backends.launch import BACKENDS, installed, pip_command
from ..keras_backends.workers import ServingWorker, WorkerKey
from .ports import pt_gradients
from .side import KerasHubModel


def check_backend(backend: str) -> None:
    """An unknown backend, or one not installed, is exit 2 (with its pip command)."""
    if backend not in BACKENDS:
        raise TfparityError(f"unknown backend {backend}: one of {', '.join(BACKENDS)}.")
    if not installed(backend):
        raise TfparityError(f"backend {backend} is not installed: {pip_command(backend)}.")


def remote_keras_hub(local: Any, backend: str) -> KerasHubModel:
    """``local`` (an in-process keras-hub side: a backbone, or a causal LM's task)
    computed on ``backend`` in a worker process of its own; exit 2 for any other side."""
    check_backend(backend)
    if not isinstance(local, KerasHubModel):
        raise TfparityError(
            f"--backend {backend} runs a keras-hub backbone or CausalLM task in a process "
            f"of its own; {local.name} loads as {local.side_kind}, which is not carried to "
            "another backend: use --backend tensorflow."
        )
    strategy = InWorker.started(backend, local)
    facts = strategy.facts
    what = "backbone" if strategy.task is None else f"{strategy.task} task"
    note = (
        f"keras-hub ran on the {backend} backend (Keras {facts['keras']}, in a process of "
        f"its own, {', '.join(facts['precision'].get('devices', []))}), from the {what} "
        "converted on TensorFlow and saved to .keras: hidden states are compared, a "
        "divergence is localised to a layer (no sub-layer taps across processes)."
    )
    return replace(
        local,
        name=f"{local.name} [{backend}]",
        source=f"{local.source}, run on the {backend} backend",
        notes=[n for n in local.notes if n != local.how_embeds_run()] + [note],
        strategy=strategy,
    )


class InWorker:
    """The forward strategy of a keras-hub side computed in a backend's serving worker:
    each run, gradient or generation one request (its arrays through ``npz`` files in a
    directory of its own); the worker and the directory end with :meth:`close`, when the
    strategy is collected, or at exit."""

    here = False

    def __init__(
        self,
        backend: str,
        worker: ServingWorker,
        directory: tempfile.TemporaryDirectory,
        command: str,
    ) -> None:
        self.backend = backend
        self.worker = worker
        self.root = Path(directory.name)
        self.command = command  # the in-process side's name, for command_name
        self.framework = f"Keras 3 on {backend}"
        self.models = f"keras-hub models on the {backend} backend"
        self.facts: dict[str, Any] = {}
        self.task: str | None = None
        self.requests = 0
        self._close = weakref.finalize(self, _ended, worker, directory)

    @classmethod
    def started(cls, backend: str, local: KerasHubModel) -> InWorker:
        """``local``'s model (the backbone, or a causal LM's task with its head) saved
        to ``.keras`` and loaded by a new worker on ``backend``, which says what it
        loaded and its facts."""
        directory = tempfile.TemporaryDirectory(prefix=f"tfparity-{backend}-")
        root = Path(directory.name)
        local.model.save(str(root / "model.keras"))
        worker = ServingWorker(WorkerKey.of(backend, ("float32",), ("keras_hub",)))
        strategy = cls(backend, worker, directory, local.name)
        loaded = json.loads(strategy.ask("load", {"model": str(root / "model.keras")}))
        strategy.task = loaded["task"]
        strategy.facts = {**json.loads(strategy.ask("facts", {})), **loaded}
        return strategy

    def ask(self, kind: str, request: Any) -> str:
        """One request to the worker; a failure is one paragraph naming the backend."""
        return self.worker.ask(kind, request)

    def call(self, kind: str, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The worker's arrays for a ``kind`` request on ``feed`` (``forward``: the
        hidden states by Hugging Face name, a task's ``logits`` too; ``generate``: the
        greedy ``tokens`` and step ``logits``; ``gradients``)."""
        self.requests += 1
        given, out = self.root / f"in{self.requests}.npz", self.root / f"out{self.requests}.npz"
        np.savez(given, **feed)
        self.ask(kind, {"given": str(given), "out": str(out)})
        with np.load(out) as held:
            return {k: held[k] for k in held.files}

    def run(self, side: KerasHubModel, batch: Batch, inputs_embeds: Any) -> Trace:
        got = self.call("forward", {k: np.asarray(v) for k, v in side.inputs(batch).items()})
        hidden = sorted((k for k in got if k.startswith("hidden_states[")), key=hidden_state_index)
        if "logits" in got:  # a causal LM's task: its outputs as the in-process task's
            return Trace({k: got[k] for k in [*hidden, "logits"]})
        pooled = ["pooler_output"] if "pooler_output" in got else []
        return Trace({k: got[k] for k in [*hidden, "last_hidden_state", *pooled]})

    def gradients(
        self,
        side: KerasHubModel,
        batch: Batch,
        objective: Objective,
        embeds: bool,
        embeds_fn: Any,
        reference: dict[str, np.ndarray] | None,
    ) -> GradientRun:
        """One batch's forward and backward pass in the worker. It is sent the batch's
        inputs and what the check's Objective is made of (its seed, the batch's index,
        the attention mask), so it draws the same seeded labels or projection as every
        other side. Its weight gradients come back by Keras variable path, the saved
        backbone's, which are the side's paths: renamed and laid out as PyTorch's
        through the same converter record and function as in process
        (:func:`~.ports.pt_gradients`) where ``reference`` is given."""
        feed = {k: np.asarray(v) for k, v in side.inputs(batch).items()}
        feed["objective:seed"] = np.int64(objective.seed)
        feed["objective:index"] = np.int64(objective.index)
        feed["objective:mask"] = np.asarray(batch.attention_mask)
        got = self.call("gradients", feed)
        hidden = sorted(
            (k.removeprefix("forward:") for k in got if k.startswith("forward:")),
            key=hidden_state_index,
        )
        by_path = {str(p): got.get(f"weight:{p}") for p in got["paths"]}
        word = side.word_embeddings().path
        run = GradientRun(
            loss=float(got["loss"]),
            forward={k: got[f"forward:{k}"] for k in hidden},
            hidden={k: got.get(f"grad:{k}") for k in hidden},
            weights=dict(by_path),
            word_embeddings=word,
            scalar=str(got["scalar"]),
        )
        if reference is not None:
            run.weights, run.word_embeddings = pt_gradients(side.ports, by_path, reference, word)
        return run

    def generator(self, side: KerasHubModel) -> Any:
        """The task's greedy generation in the worker (:class:`RemoteGenerator`); a
        backbone refuses, as on TensorFlow (no LM head)."""
        if self.task is None:
            return side.in_process_generator()
        return RemoteGenerator(side, self)

    def ids_only_reason(self, side: KerasHubModel) -> str:
        return (
            f"{side.name} runs on the {self.backend} backend in a process of its own, "
            "which is given token ids only"
        )

    def command_name(self, side: KerasHubModel) -> str:
        return f"{self.command} --backend {self.backend}"

    def side_kind(self, side: KerasHubModel) -> str:
        what = "backbone" if self.task is None else "CausalLM task"
        return f"a keras-hub {what} on the {self.backend} backend"

    def close(self) -> None:
        """End the worker process and drop its files now (else at exit)."""
        self._close()


def _ended(worker: ServingWorker, directory: tempfile.TemporaryDirectory) -> None:
    worker.close()
    directory.cleanup()


@dataclass
class RemoteGenerator:
    """Greedy generation on ``side`` (a keras-hub CausalLM task computed in a worker),
    as a :class:`~tfparity.adapters.interfaces.sides.Generator`.

    The tokens and each step's logits come from the task's own ``generate`` in the
    worker, with keras-hub's greedy sampler and no stop token, as on TensorFlow
    (:class:`~.generation.KerasHubGenerator`), so the generation check judges it
    unchanged: its cached steps (``call_with_cache`` on the task's KV cache, on that
    backend) against a recomputation without cache (the side's ``run``, one full pass of
    the task in the same worker), and, where tokens part by a defect, the teacher-forced
    sequence's cross-check names the layer. The start from gathered ``inputs_embeds`` is
    refused by name: the worker is given token ids only."""

    side: Any
    strategy: InWorker
    notes: list[str] = field(default_factory=list)
    keeps_cache: bool = True  # generate_step decodes on call_with_cache's KV cache
    embeds_refusal: str | None = None
    decoding: str = CAUSAL_DECODING

    def __post_init__(self) -> None:
        backend, task = self.strategy.backend, self.strategy.task
        self.embeds_refusal = self.side.inputs_embeds_reason
        self.notes.append(
            f"keras-hub on the {backend} backend: the tokens are {task}.generate's with a "
            "greedy sampler (keras_hub.samplers.GreedySampler, stop_token_ids=None, its "
            "loop driven step by step in Python so each step's logits are read as "
            "numbers) in the worker process, and its cached step logits those the sampler "
            "chose from (call_with_cache on the task's KV cache); the recomputation is the "
            "task's full forward pass in the same process."
        )

    def generate(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """The task's greedy ``generate`` in the worker: the new tokens and the logits
        each cached step chose from."""
        feed = {"prompt": np.asarray(prompt, np.int32), "new_tokens": np.int32(new_tokens)}
        got = self.strategy.call("generate", feed)
        return GreedyRun(got["tokens"], got["logits"], cached=True)

    def step_logits(self, prompt: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The task's logits for each of ``tokens``, from one full pass in the worker."""
        return recomputed_logits(self.side, prompt, tokens)

    def forward_pass(self, reference: Any, prompt: np.ndarray, tokens: np.ndarray) -> ForwardPass:
        """The teacher-forced sequence on the task (hidden states and logits)."""
        return teacher_forced_pass(self.side, reference, prompt, tokens)

    def generate_from_embeds(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """Refused (the check reads :attr:`embeds_refusal` first): token ids only."""
        raise TfparityError(f"{self.embeds_refusal}.")
