"""One Keras 3 model on each Keras backend (TensorFlow, JAX, PyTorch), one process each.

Keras fixes its backend when it is first imported (``KERAS_BACKEND``), so a model runs
on three backends only in three processes. This package is the child process and its
pool, one worker stack for every use: :mod:`.worker` is what runs inside one (one
serving loop whose request kinds are handlers in one table, :data:`.worker.REQUESTS`:
a backend's run for ``tfparity backends``, and :mod:`.hub_worker`'s for the keras-hub
side on another backend, :mod:`tfparity.adapters.keras_hub.remote`); :mod:`.workers`
starts and pools them (one :class:`~.workers.ServingWorker`, one error, deadline and
shutdown path); :mod:`.launch` runs a model on each and reads back what they recorded.
The judging is framework-free, in :mod:`tfparity.cross_backend`.
"""

from .launch import (
    BACKENDS,
    BackendRun,
    LaunchPlan,
    choose_backends,
    choose_referee,
    installed,
    pip_command,
    run_backends,
)

__all__ = [
    "BACKENDS",
    "BackendRun",
    "LaunchPlan",
    "choose_backends",
    "choose_referee",
    "installed",
    "pip_command",
    "run_backends",
]
