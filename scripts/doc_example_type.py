"""What an example is (its dataclass) and the helpers every part of
scripts/doc_examples.py shares: the repo root, running a sibling script in this
process, running in the scratch directory."""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Example:
    """One example output on a page.

    ``argv`` is a ``tfparity`` command line (run in the scratch directory), or ``run`` a
    function of that directory giving (exit code, output); ``setup`` names the SETUPS it
    needs first; ``keep`` cuts an excerpt from the cleaned output; ``minilm``: it loads
    the real checkpoint (the tests mark it slow); ``tested``: tests re-run it.
    """

    name: str
    page: str
    exit: int
    argv: tuple[str, ...] = ()
    run: Callable[[Path], tuple[int, str]] | None = None
    setup: tuple[str, ...] = ()
    keep: Callable[[str], str] | None = None
    minilm: bool = False
    tested: bool = True
    needs_cpu_only: bool = False  # its output is that of a machine without a GPU
    why_untested: str = ""
    fence: str = field(default="```")


def run_script(name: str, *args: str) -> None:
    """Run scripts/NAME.py in this process (TF is imported once), its prints dropped."""
    argv = sys.argv
    sys.argv = [name, *args]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(ROOT / "scripts" / f"{name}.py"), run_name="__main__")
    finally:
        sys.argv = argv


@contextlib.contextmanager
def in_dir(work: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(work)
    try:
        yield
    finally:
        os.chdir(here)
