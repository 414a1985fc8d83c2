"""Doing independent pieces of I/O at once (downloads of several files, several kernels), with the failures of
one piece reported as if they had happened alone."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def run_all(work: Callable[[Item], Result], items: Sequence[Item], workers: int) -> list[Result]:
    """`work(item)` for every item, at most `workers` at a time, each in a copy of the caller's context (the
    command's budget goes with it); the results in the order of `items`. On the first failure the items not
    started yet are dropped and, once the started ones have ended, the failure of the earliest item is raised
    (the same one whichever thread was quicker: the first item always starts)."""
    if len(items) <= 1 or workers <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, work, item) for item in items]
        wait(futures, return_when=FIRST_EXCEPTION)
        if any(future.done() and not future.cancelled() and future.exception() is not None for future in futures):
            for future in futures:
                future.cancel()
            wait(futures)
            failed = next(future for future in futures if not future.cancelled() and future.exception() is not None)
            raise failed.exception()  # type: ignore[misc]
        return [future.result() for future in futures]
