"""Progress of a flow run: a live rich bar per stage (on a TTY), plain lines otherwise.

Flows report through `reporter()`: the flow code (which always runs in the calling process,
whatever task runner executes the tasks) announces the stages it will run, then each stage's
task count and every finished task. The CLI installs a reporter around the flow call; a flow run
by a worker has none and reports nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class Reporter(Protocol):
    """Receives a flow's progress; every method must be cheap and never raise."""

    def plan(self, stages: Sequence[str]) -> None:
        """The stages the flow will run, in order."""

    def start(self, stage: str, total: int) -> None:
        """`stage` starts with `total` tasks."""

    def advance(self, stage: str, cached: bool = False) -> None:
        """One task of `stage` finished (from cache when `cached`)."""

    def finish(self, stage: str, note: str = "") -> None:
        """`stage` is done."""


class NullReporter:
    """Reports nothing (flows run by a worker)."""

    def plan(self, stages: Sequence[str]) -> None:
        pass

    def start(self, stage: str, total: int) -> None:
        pass

    def advance(self, stage: str, cached: bool = False) -> None:
        pass

    def finish(self, stage: str, note: str = "") -> None:
        pass


class _Counts:
    """Shared bookkeeping: stage order, per-stage done/cached/total counts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stages: list[str] = []
        self.done: dict[str, int] = {}
        self.cached: dict[str, int] = {}
        self.total: dict[str, int] = {}

    def plan(self, stages: Sequence[str]) -> None:
        with self.lock:
            self.stages = list(stages)

    def position(self, stage: str) -> str:
        if stage not in self.stages:
            self.stages.append(stage)
        return f"{self.stages.index(stage) + 1}/{len(self.stages)}"


class PlainReporter(_Counts):
    """One line per stage start and end, for logs and pipes."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def start(self, stage: str, total: int) -> None:
        with self.lock:
            self.total[stage], self.done[stage], self.cached[stage] = total, 0, 0
            self.console.print(f"stage {self.position(stage)} {stage}: {total} task(s)")

    def advance(self, stage: str, cached: bool = False) -> None:
        with self.lock:
            self.done[stage] = self.done.get(stage, 0) + 1
            self.cached[stage] = self.cached.get(stage, 0) + int(cached)

    def finish(self, stage: str, note: str = "") -> None:
        with self.lock:
            done, cached = self.done.get(stage, 0), self.cached.get(stage, 0)
            extra = f"; {note}" if note else ""
            self.console.print(f"stage {self.position(stage)} {stage}: done, {done} task(s), {cached} from cache{extra}")


class RichReporter(_Counts):
    """A live rich progress display: one bar per stage with `done/total` tasks and cache hits."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.progress = Progress(
            TextColumn("[bold]{task.fields[position]}[/bold] {task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("tasks  {task.fields[cached]} cached {task.fields[note]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.ids: dict[str, TaskID] = {}

    def start(self, stage: str, total: int) -> None:
        with self.lock:
            self.cached[stage] = 0
            self.ids[stage] = self.progress.add_task(stage, total=total, position=self.position(stage), cached=0, note="")

    def advance(self, stage: str, cached: bool = False) -> None:
        with self.lock:
            self.cached[stage] = self.cached.get(stage, 0) + int(cached)
            if stage in self.ids:
                self.progress.update(self.ids[stage], advance=1, cached=self.cached[stage])

    def finish(self, stage: str, note: str = "") -> None:
        with self.lock:
            if stage in self.ids:
                task = self.progress.tasks[self.ids[stage]]
                self.progress.update(self.ids[stage], completed=task.total, note=note)


class StageTracker:
    """Forwards to another reporter and remembers which stages started and have not finished, so a
    failed run can say which stage it failed in."""

    def __init__(self, inner: Reporter) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.open: list[str] = []

    def plan(self, stages: Sequence[str]) -> None:
        self.inner.plan(stages)

    def start(self, stage: str, total: int) -> None:
        with self.lock:
            if stage not in self.open:
                self.open.append(stage)
        self.inner.start(stage, total)

    def advance(self, stage: str, cached: bool = False) -> None:
        self.inner.advance(stage, cached)

    def finish(self, stage: str, note: str = "") -> None:
        with self.lock:
            if stage in self.open:
                self.open.remove(stage)
        self.inner.finish(stage, note)

    def current(self) -> str | None:
        """The earliest stage started and not finished (stages are collected in the order they start); None when none is."""
        with self.lock:
            return self.open[0] if self.open else None


_current: Reporter = NullReporter()


def reporter() -> Reporter:
    """The reporter of the running flow (a NullReporter unless the CLI installed one)."""
    return _current


def counted(task: Any, stage: str, *args: Any, **kwargs: Any) -> Any:
    """Call the Prefect task `task` in the flow and return its result, advancing `stage` by one task,
    counted as from cache exactly when Prefect's final state of the task run is `Cached`."""
    state = task(*args, return_state=True, **kwargs)
    reporter().advance(stage, cached=state.is_completed() and state.name == "Cached")
    return state.result()


@contextmanager
def tracking_stages() -> Iterator[StageTracker]:
    """Install a StageTracker in front of the current reporter for the duration."""
    global _current
    previous = _current
    tracker = StageTracker(previous)
    _current = tracker
    try:
        yield tracker
    finally:
        _current = previous


@contextmanager
def reporting(console: Console | None = None, live: bool | None = None) -> Iterator[Reporter]:
    """Install a reporter for the duration: live bars when the console is a terminal, plain lines otherwise."""
    global _current
    console = console or Console(stderr=True, highlight=False)
    live = console.is_terminal if live is None else live
    previous = _current
    if live:
        rich = RichReporter(console)
        _current = rich
        try:
            with rich.progress:
                yield rich
        finally:
            _current = previous
    else:
        _current = PlainReporter(console)
        try:
            yield _current
        finally:
            _current = previous
