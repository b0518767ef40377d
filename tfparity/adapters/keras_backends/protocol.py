"""The line protocol between the parent and a serving worker process: one line per
message, each starting with :data:`MARK`, so anything a framework prints on the
worker's stdout is skipped. The parent reads with a deadline (a worker that hangs is
reported, not waited on for ever). Framework-free on both ends.

A request is one line ``KIND JSON``; the worker answers it with one line, ``done TEXT``
(what the request asked for, often nothing: its files are written) or ``error TEXT``
(one paragraph). Each kind is a :class:`Handler` in the worker's table
(:data:`.worker.REQUESTS`): one loop, one error path, one deadline for every kind."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

MARK = "tfparity-worker:"


def answer(reply: IO[str], kind: str, text: str = "") -> None:
    """Write one protocol line ``kind text`` (``text`` on one line) and flush it."""
    reply.write(f"{MARK}{kind} {' '.join(text.split())}\n")
    reply.flush()


@dataclass
class Session:
    """What one serving process holds between its requests: the modules it imported and
    what a kind of request keeps for the next (a loaded model, by the handler's key)."""

    imports: list[str]
    held: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Handler:
    """One kind of request: ``answer(session, text)`` gives the ``done`` line's text, or
    raises (the worker answers ``error`` with the exception's one paragraph). ``fresh``:
    the next request starts from Keras's defaults (float32 policy, a cleared session),
    as a run that set the float64 policy needs; False for a kind that keeps a loaded
    model between requests."""

    answer: Callable[[Session, str], str]
    fresh: bool = True


def paragraph(error: BaseException) -> str:
    """An exception as the one paragraph the parent reports: its type and message."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


class Lines:
    """The protocol lines of one worker's stdout, read with a deadline (``select`` on the
    pipe, so a worker that says nothing cannot block the parent past it)."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._fd = pipe.fileno()
        self._buffer = b""

    def next(self, timeout_s: float) -> tuple[str, str] | None:
        """The next protocol line as ``(kind, text)``; None when the worker's stdout
        closed (it ended). TimeoutError past ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" not in self._buffer:
                chunk = self._read(deadline)
                if not chunk:
                    return None
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\n", 1)
            text = raw.decode("utf-8", "replace")
            if text.startswith(MARK):
                kind, _, rest = text[len(MARK) :].partition(" ")
                return kind, rest.strip()

    def _read(self, deadline: float) -> bytes:
        ready, _, _ = select.select([self._fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError
        return os.read(self._fd, 65536)
