"""kernelpin.store.parallel.run_all: several failures read as one, always the same one (the earliest item's), whichever
thread failed first, so an offline sync or a bad server names the same file each run."""

from __future__ import annotations

import threading
import time

import pytest

from kernelpin.store.parallel import run_all


def test_the_earliest_items_failure_is_raised_whichever_thread_failed_first():
    # Failed before: the failure that ended the wait first was raised (here item 1's), so which file an offline
    # sync named depended on the threads (test_store_direct's offline test failed now and then).
    second_failed = threading.Event()

    def work(item: int) -> int:
        if item == 0:
            second_failed.wait(5)
            time.sleep(0.2)  # fails well after item 1: only the choice of failure is tested, not a time
        elif item == 1:
            second_failed.set()
        raise ValueError(f"item {item}")

    with pytest.raises(ValueError, match="^item 0$"):
        run_all(work, [0, 1, 2], workers=3)


def test_results_come_in_the_order_of_the_items():
    assert run_all(lambda item: item * 2, [3, 1, 2], workers=3) == [6, 2, 4]
