"""One error hierarchy for envgen; the CLI maps each class to an exit code.

Library code raises these; only ``envgen.cli`` prints them or exits. Every error carries a
``hint``: what the user should do next.
"""

from __future__ import annotations


class EnvgenError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(EnvgenError):
    """The request itself is malformed: an unknown name, a bad version, a bad option."""

    exit_code = 2


class InfeasibleError(EnvgenError):
    """A well-formed request that no combination in the matrix satisfies."""

    exit_code = 2

    def __init__(
        self, message: str, *, hint: str | None = None, explanation: object = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.explanation = explanation


class DataError(EnvgenError):
    """matrix/ data is missing, malformed or inconsistent."""

    exit_code = 1


class NetworkError(EnvgenError):
    """A package index or file could not be fetched (after retries)."""

    exit_code = 1


class HarvestError(EnvgenError):
    """An index answered, but with something envgen cannot read (truncated metadata, bad page)."""

    exit_code = 1
