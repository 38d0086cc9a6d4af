"""Cancellation: the Python counterpart of the web's AbortController / AbortSignal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class AbortSignal:
    """Read side: `aborted`, `reason`, `await signal.wait()`, and listeners for providers and tools."""

    def __init__(self) -> None:
        self.aborted = False
        self.reason: Any = None
        self._listeners: list[Callable[[Any], None]] = []
        self._event: asyncio.Event | None = None

    async def wait(self) -> Any:
        """Return the reason once the signal is aborted."""
        if not self.aborted:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        return self.reason

    def add_listener(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Call `listener(reason)` on abort (at once if already aborted); returns a remover."""
        if self.aborted:
            listener(self.reason)
            return lambda: None
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _abort(self, reason: Any) -> None:
        if self.aborted:
            return
        self.aborted = True
        self.reason = "aborted" if reason is None else reason
        if self._event is not None:
            self._event.set()
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener(self.reason)


class AbortController:
    """Write side: `controller.abort(reason)` aborts `controller.signal`; a second abort is a no-op."""

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        self.signal._abort(reason)
