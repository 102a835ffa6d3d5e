"""Domain errors. The CLI turns them into one line on stderr and an exit code, in one place.

A message may name settings as ``{name}`` placeholders (listed in ``settings``): the library shows
the setting's name (``max_tokens 5``), the CLI the flag it comes from (``--max-tokens 5``).
"""

from __future__ import annotations

from collections.abc import Callable


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless one: "1 head", "3 heads", "2 times"."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


class CtxembedError(Exception):
    """Base error: a message meant for a person, and the process exit code it maps to."""

    exit_code = 1

    def __init__(self, message: str, *settings: str):
        self.template = message
        self.settings = settings
        self.message = self.render(lambda name: name)
        super().__init__(self.message)

    def render(self, label: Callable[[str], str]) -> str:
        """The message with each ``{name}`` of a setting replaced by ``label(name)``."""
        message = self.template
        for name in self.settings:
            message = message.replace("{" + name + "}", label(name))
        return message


class DataError(CtxembedError):
    """Bad data or a runtime failure: a malformed file, an empty sentence, no vectors (exit 1)."""

    exit_code = 1


class UsageError(CtxembedError):
    """The command line asked for something impossible or unsafe (exit 2)."""

    exit_code = 2


class SettingError(UsageError, ValueError):
    """A setting's value is impossible or conflicts with another setting (exit 2)."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM: stop now. A BaseException so that no ``except Exception`` (ours, click's)
    swallows it on the way out; the CLI prints ``ctxembed: interrupted`` and exits 128 + signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.exit_code = 128 + signum


class OutputClosed(BaseException):
    """stdout's reader went away (EPIPE), as with ``| head``: not an error, exit 0 silently."""
