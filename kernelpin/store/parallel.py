"""Doing independent pieces of I/O at once (downloads of several files, several kernels), with the failures of
one piece reported as if they had happened alone."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# How long the calling thread may spend on one item before the other workers join it. A server on the same machine
# or network answers a small file sooner, and there threads only contend for the interpreter (3-5 ms of a 4-file
# variant on 2 cores); across the internet a connection alone takes longer, and then every worker runs at once.
ALONE = 0.005


class _Run(Generic[Item, Result]):
    """One run_all: the items not started yet, handed out one at a time to whichever thread asks, until one fails
    or the run ends."""

    def __init__(self, work: Callable[[Item], Result], items: Sequence[Item]) -> None:
        self.work, self.items = work, items
        # Each item in a copy of the caller's context, made in the caller's thread (the command's budget goes with it).
        self.contexts = [contextvars.copy_context() for _ in items]
        self.results: list[Result | None] = [None] * len(items)
        self.failures: dict[int, BaseException] = {}
        self.next = 0
        self.handing = threading.Lock()
        self.progressed = threading.Event()  # set as each item ends

    def take(self) -> int | None:
        with self.handing:
            if self.failures or self.next == len(self.items):
                return None
            self.next += 1
            return self.next - 1

    def serve(self, index: int | None) -> None:
        """Do `index` (taken already), then take items until none is left or one has failed."""
        while index is not None:
            try:
                self.results[index] = self.contexts[index].run(self.work, self.items[index])
            except BaseException as error:  # noqa: BLE001 - raised in the caller's thread once the started ones end
                with self.handing:
                    self.failures[index] = error
            self.progressed.set()
            index = self.take()

    def end(self) -> None:
        """No item is handed out any more (the run is over, or the caller was interrupted: Ctrl-C)."""
        with self.handing:
            self.next = len(self.items)
        self.progressed.set()


def run_all(
    work: Callable[[Item], Result],
    items: Sequence[Item],
    workers: int,
    on_interrupt: Callable[[], None] = lambda: None,
) -> list[Result]:
    """`work(item)` for every item, at most `workers` at a time, each in a copy of the caller's context (the
    command's budget goes with it); the results in the order of `items`.

    The calling thread works through the items itself; once it has spent ALONE seconds on one, the other workers
    join it. On the first failure the items not started yet are dropped and, once the started ones have ended,
    the failure of the earliest item is raised (the same one whichever thread was quicker: the caller takes the
    first item, which always starts). On Ctrl-C (in an item the caller works on, or between items) `on_interrupt()`
    is called first, for the started items to stop waiting (HubSource.stop_waiting), and the interrupt is raised."""
    if len(items) <= 1 or workers <= 1:
        return [work(item) for item in items]
    run = _Run(work, items)
    first = run.take()
    helpers: list[threading.Thread] = []

    def watch() -> None:  # the first helper: joins, and brings the others, once an item takes ALONE
        while run.progressed.wait(ALONE):
            run.progressed.clear()
            if run.next == len(items) or run.failures:
                return
        for _ in range(min(workers, len(items)) - 2):
            helper = threading.Thread(target=lambda: run.serve(run.take()))
            helpers.append(helper)
            helper.start()
        run.serve(run.take())

    watcher = threading.Thread(target=watch)
    watcher.start()
    escaped = False  # serve records what an item raises; what escapes it came between items (Ctrl-C)
    try:
        run.serve(first)
    except BaseException:
        escaped = True
        raise
    finally:
        run.end()
        interrupt = next((error for error in run.failures.values() if not isinstance(error, Exception)), None)
        if interrupt is not None or escaped:
            on_interrupt()  # Ctrl-C: the items started end without waiting out a silent server
        watcher.join()  # the helpers it started are all in `helpers` once it has ended
        for helper in helpers:
            helper.join()
    if interrupt is not None:  # raised as it came, not as the errors it caused in the other items
        raise interrupt
    if run.failures:
        raise run.failures[min(run.failures)]
    return run.results  # type: ignore[return-value]  # every item done: no None left
