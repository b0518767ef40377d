"""The line protocol between the parent and a serving worker process: one line per
message, each starting with :data:`MARK`, so anything a framework prints on the
worker's stdout is skipped. The parent reads with a deadline (a worker that hangs is
reported, not waited on for ever). Framework-free on both ends."""

from __future__ import annotations

import os
import select
import time
from typing import IO

MARK = "tfparity-worker:"


def answer(reply: IO[str], kind: str, text: str = "") -> None:
    """Write one protocol line ``kind text`` (``text`` on one line) and flush it."""
    reply.write(f"{MARK}{kind} {' '.join(text.split())}\n")
    reply.flush()


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
