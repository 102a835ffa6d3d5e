"""Domain errors. The CLI turns them into one line on stderr and an exit code, in one place."""

from __future__ import annotations


class CtxembedError(Exception):
    """Base error: a message meant for a person, and the process exit code it maps to."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class DataError(CtxembedError):
    """Bad data or a runtime failure: a malformed file, an empty sentence, no vectors (exit 1)."""

    exit_code = 1


class UsageError(CtxembedError):
    """The command line asked for something impossible or unsafe (exit 2)."""

    exit_code = 2
