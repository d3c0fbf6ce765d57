"""The one deadline of a deploy-time Lambda invocation: every command, download and call of it ends before it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .errors import DeadlineExceededError


@dataclass(frozen=True)
class Deadline:
    """When this invocation must have answered, as a ``time.monotonic()`` value: the moment Lambda stops it, less
    a margin kept for reporting the result. ``minimum_step`` is the least time a step is started with."""

    at: float
    minimum_step: float = 1.0

    @staticmethod
    def of(context: Any, *, fallback_seconds: float, margin: float, minimum_step: float = 1.0) -> Deadline:
        """From the Lambda context's remaining time (``get_remaining_time_in_millis``), else ``fallback_seconds``
        (the function's own limit), less ``margin``."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        seconds = remaining() / 1000 if callable(remaining) else fallback_seconds
        return Deadline(time.monotonic() + seconds - margin, minimum_step)

    @staticmethod
    def after(seconds: float, minimum_step: float = 1.0) -> Deadline:
        return Deadline(time.monotonic() + seconds, minimum_step)

    def remaining(self) -> float:
        """Seconds until the deadline (negative once it has passed)."""
        return self.at - time.monotonic()

    def seconds_left(self, keep: float = 0, *, before: str = "going on") -> float:
        """Seconds the next step may take, keeping ``keep`` seconds back for later steps; a step that would
        have less than ``minimum_step`` is not started: ``DeadlineExceededError``."""
        left = self.remaining() - keep
        if left < self.minimum_step:
            raise DeadlineExceededError(
                f"ran out of time before {before}: too little of this invocation's time is left "
                f"({max(left, 0):.1f} s, a step needs {self.minimum_step:.0f} s)")
        return left
