"""What an operation refuses, for each surface to report its own way (the
CLI: a usage error or exit status 1; the status page: 404 or 409)."""

from __future__ import annotations

from ..errors import DgsError


class OperationError(DgsError):
    """An operation refused its input; nothing changed."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownTarget(OperationError):
    """No schedule, check or task by that name (or not a valid one).
    ``argument`` names the command-line argument that gave it."""

    def __init__(self, message: str, argument: str = "NAME") -> None:
        super().__init__(message)
        self.argument = argument


class ActionRefused(OperationError):
    """The action does not apply to the schedule as it is (e.g. inactive)."""
