"""Bounded capture of an output stream: keep the head, count the rest, never block the writer."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import BinaryIO

from tasks_lib.sandbox.base import CapturedOutput

CHUNK = 64 * 1024


class BoundedSink:
    """Accumulates the first `limit` bytes of a stream and counts every byte."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Take one chunk."""
        self.total += len(data)
        room = self.limit - len(self._kept)
        if room > 0:
            self._kept += data[:room]

    def result(self) -> CapturedOutput:
        """The captured stream."""
        return CapturedOutput(
            text=bytes(self._kept).decode("utf-8", errors="replace"),
            total_bytes=self.total,
            truncated=self.total > len(self._kept),
        )


def drain_file(handle: BinaryIO, sink: BoundedSink) -> threading.Thread:
    """Start a daemon thread that reads `handle` to EOF into `sink`, then closes it."""

    def pump() -> None:
        try:
            while chunk := handle.read1(CHUNK) if hasattr(handle, "read1") else handle.read(CHUNK):
                sink.feed(chunk)
        except (OSError, ValueError):
            pass  # the pipe was closed under us after the command ended; what was read is kept
        finally:
            handle.close()

    thread = threading.Thread(target=pump, daemon=True, name="sandbox-output")
    thread.start()
    return thread


def drain_chunks(
    chunks: Iterable[bytes], sink: BoundedSink, stream_errors: tuple[type[BaseException], ...] = (OSError,)
) -> threading.Thread:
    """Start a daemon thread that feeds every chunk of `chunks` into `sink`.

    A stream that breaks with one of `stream_errors` (the container was removed under it) ends
    capture; `total_bytes` then says how much arrived.
    """

    def pump() -> None:
        try:
            for chunk in chunks:
                sink.feed(chunk)
        except stream_errors:
            pass

    thread = threading.Thread(target=pump, daemon=True, name="sandbox-output")
    thread.start()
    return thread
