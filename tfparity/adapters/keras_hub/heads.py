"""keras-hub's text task heads (a ``MaskedLM``'s, a ``TextClassifier``'s) as the TF side,
checked whole against the matching Hugging Face head.

keras-hub's converters port a checkpoint's backbone only; a task's own head is made up
at random by ``from_preset``. Where the family declares its head
(:class:`~tfparity.architectures.keras_hub_layouts.KerasHubHead`: each head variable and
the Hugging Face weight it holds), a task saved to ``.keras`` (or held in memory) is run
whole: its ``logits`` against the checkpoint's head, every hidden state as for the
backbone, and weight hints for the head through the same map (:func:`head_ports`), so a
damaged head weight is named. A masked LM runs with every position masked
(``mask_positions`` = 0..L-1), so its logits are Hugging Face's, one row per token. A
task whose family declares no such head keeps the refusal of
:func:`~.task.task_backbone`.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures.heads import Head
from ...architectures.keras_hub_layouts import KerasHubHead
from .ports import Ported, pt_name, rebound
from .side import KerasHubModel
from .task import KerasHubTask, head_variables


def head_map(task: Any) -> KerasHubHead | None:
    """The family's map of ``task``'s head onto Hugging Face's, or None (no family, or
    the family declares no head for this task class)."""
    from ...architectures import keras_hub_backbones

    arch = keras_hub_backbones().get(type(task.backbone).__name__)
    layout = arch.keras_hub if arch is not None else None
    heads = layout.heads if layout is not None else ()
    return next((h for h in heads if h.task == type(task).__name__), None)


def mapped_head(task: Any, head: Head | None) -> KerasHubHead | None:
    """The map ``task``'s own head is checked through, where the task is checked whole:
    it has a head of its own, the family maps it, and ``head`` (``--head``) is not BASE."""
    if head is Head.BASE or not head_variables(task):
        return None
    return head_map(task)


def _hook(transposed: bool) -> Any:
    def hook(hf: Any, shape: Any) -> Any:
        return np.reshape(np.transpose(hf) if transposed else hf, shape)

    return hook


def head_ports(task: Any, found: KerasHubHead) -> list[Ported]:
    """The head's variables as converter records (:class:`~.ports.Ported`): weight hints
    and gradients name them by their Hugging Face weights, as the backbone's."""
    by_path = {str(v.path): v for v in task.weights}
    return [
        Ported(by_path[w.path], w.hf_key, _hook(w.transposed))
        for w in found.weights
        if w.path in by_path
    ]


def port_head(task: Any, directory: str | Path) -> list[str]:
    """Load the head of the Hugging Face checkpoint in ``directory`` into ``task``'s own
    head, through the family's map (what keras-hub's converters leave out); the HF keys
    it read (a decoder tied to the token embedding is the converter's already). Exit 2
    where the family maps no head for the task."""
    from safetensors.numpy import load_file

    from ...errors import TfparityError

    found = head_map(task)
    if found is None:
        raise TfparityError(f"tfparity maps no head of {type(task).__name__} onto transformers'.")
    weights = load_file(str(Path(directory) / "model.safetensors"))
    read = []
    done = {id(v) for v in task.backbone.weights}  # a tied decoder: the converter's
    for port in head_ports(task, found):
        name = pt_name(port.hf_key, weights)
        if id(port.variable) in done and name is None:
            continue  # a tied alias (the decoder's bias is the head's) the file leaves out
        if name is None:
            raise TfparityError(f"{directory} holds no {port.hf_key} for {type(task).__name__}.")
        port.variable.assign(port.hook(weights[name], list(port.variable.shape)))
        done.add(id(port.variable))
        read.append(name)
    return read


def head_task_side(side: KerasHubModel, task: Any, found: KerasHubHead) -> KerasHubHeadTask:
    """``side`` (the task's backbone, bound to its checkpoint) as the task whole: its
    ports extended by the head's (:func:`head_ports`), the head's known difference
    from transformers' noted."""
    values = {f.name: getattr(side, f.name) for f in fields(side) if f.init}
    whole = KerasHubHeadTask(**values, task=task, mapped=found)
    whole.ports = [*side.ports, *head_ports(task, found)]
    whole.notes = [n for n in side.notes if n != side.how_embeds_run()]
    whole.notes.append(whole.how_embeds_run())
    if found.differs:
        whole.notes.append(f"A known difference of this port: {found.differs}.")
    return whole


@dataclass
class KerasHubHeadTask(KerasHubTask):
    """A keras-hub task with a head of its own, mapped onto Hugging Face's: the
    backbone's side, with the task's ``logits``."""

    mapped: KerasHubHead | None = None

    @property
    def head(self) -> Head:
        return Head(self.mapped.kind)

    @property
    def headless_reason(self) -> str:
        return f"{self.name} is a {self.head.value} task: no next-token head to decode"

    def named_weights(self) -> list[tuple[str, Any]]:
        return [(w.path, w) for w in self.task.weights]

    def how_embeds_run(self) -> str:
        return (
            f"keras-hub task {type(self.task).__name__}: the input_ids path calls the task "
            "(logits from its own head, mapped onto the checkpoint's by tfparity); the "
            "inputs_embeds path runs the same task with the token lookup's output replaced "
            "by the embeddings fed; hidden_states[0] is the first block's input, the last "
            "one the backbone's sequence_output."
        )

    def task_feed(self, feed: dict[str, Any]) -> dict[str, Any]:
        """A masked LM's call at every position (``mask_positions`` 0..L-1), so that its
        logits line up with Hugging Face's, one row per token."""
        if "mask_positions" not in self.task.input:
            return feed
        rows, length = np.shape(feed["token_ids"])
        return {**feed, "mask_positions": np.tile(np.arange(length, dtype=np.int32), (rows, 1))}

    def reloaded(self) -> KerasHubHeadTask:
        """The task saved to ``.keras`` and loaded again, head and all."""
        import keras

        with tempfile.TemporaryDirectory(prefix="tfparity-task-") as tmp:
            path = Path(tmp) / "task.keras"
            self.task.save(path)
            task = keras.saving.load_model(path, compile=False)
        twin = KerasHubHeadTask(
            **{f.name: getattr(self, f.name) for f in fields(self) if f.init},
        )
        twin.task, twin.backbone = task, task.backbone
        twin.ports = rebound(self.ports, task.weights)
        twin.name = f"{self.name} (saved to .keras and reloaded)"
        twin.notes = list(self.notes)
        twin._embeds_fn = None
        return twin
