"""Progress on stderr: a tqdm bar (items/s, ETA) on a terminal, plain periodic lines
otherwise (CI logs do not render carriage returns, and a bar there is noise)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO


@dataclass
class Progress:
    """``update(n)`` after each batch; ``close()`` at the end. ``mode``: ``bar``,
    ``lines`` or ``none`` (``auto`` picks bar when the stream is a terminal)."""

    total: int
    mode: str = "auto"
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    every_s: float = 10.0
    label: str = "sweep"
    done: int = 0
    _bar: Any = None
    _start: float = field(default_factory=time.perf_counter)
    _last: float = 0.0

    def __post_init__(self) -> None:
        if self.mode == "auto":
            self.mode = "bar" if self.stream.isatty() else "lines"
        if self.mode == "bar":
            import shutil

            from tqdm import tqdm

            # A pseudo-terminal may report 0 columns; tqdm then draws nothing.
            width = shutil.get_terminal_size((100, 20)).columns
            self._bar = tqdm(
                total=self.total,
                unit="item",
                desc=self.label,
                file=self.stream,
                smoothing=0.1,
                ncols=min(width, 120),
                nrows=20,
            )
        self._last = self._start

    def stage(self, doing: str) -> None:
        """Say what the sweep does before its first item is done (``loading tiny:bert``,
        ``first batch``): the load, a conversion and the first batch's tracing take tens
        of seconds with nothing else to show. One line per stage (none in ``none`` mode);
        the rate and ETA count from the first batch on, not from the load."""
        if self.mode == "none":
            return
        text = f"{self.label}: {doing}..."
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
            if self.done == 0:  # tqdm's rate too counts from here
                self._bar.reset(total=self.total)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()
        self._start = self._last = time.perf_counter()

    def update(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        if self.mode == "lines" and (now - self._last >= self.every_s or self.done >= self.total):
            self._last = now
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()

    def line(self, now: float | None = None) -> str:
        elapsed = (now or time.perf_counter()) - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = f"{left:.0f}s" if left == left else "?"
        return (
            f"{self.label}: {self.done}/{self.total} items ({pct:.0f}%), "
            f"{rate:.1f} items/s, elapsed {elapsed:.0f}s, ETA {eta}"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
