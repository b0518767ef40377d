"""Errors that mean "bad usage or bad input" (exit code 2), as opposed to a parity failure."""

from __future__ import annotations


class TfparityError(Exception):
    """A problem with what the user asked for or gave us.

    The CLI prints the message as one paragraph on stderr and exits 2; no traceback
    unless ``--debug``. Raise it with a message that says what was wrong and what to do.
    """

    exit_code = 2
