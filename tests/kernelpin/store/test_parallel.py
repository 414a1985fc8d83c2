"""kernelpin.store.parallel.run_all: several failures read as one, always the same one (the earliest item's), whichever
thread failed first, so an offline sync or a bad server names the same file each run."""

from __future__ import annotations

import threading
import time

import pytest

from kernelpin.store import parallel
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


def test_items_a_server_answers_quickly_run_in_the_calling_thread(monkeypatch):
    # Failed before: every run started its workers at once, which on 2 cores cost a 4-file variant 3-5 ms over doing
    # the files one by one when a server on the same machine answered each in a few ms (issue 53).
    monkeypatch.setattr(parallel, "ALONE", 60.0)  # no item takes this long here
    before = threading.active_count()
    threads = run_all(lambda item: (threading.get_ident(), threading.active_count()), list(range(6)), workers=8)
    assert {ident for ident, _ in threads} == {threading.get_ident()}
    assert max(count for _, count in threads) <= before + 1  # at most the watcher waits beside the caller


def test_the_workers_join_once_an_item_takes_longer_and_never_exceed_their_number(monkeypatch):
    monkeypatch.setattr(parallel, "ALONE", 0.001)
    others_ran = threading.Event()
    running, most, counting = 0, 0, threading.Lock()

    def work(item: int) -> int:
        nonlocal running, most
        with counting:
            running += 1
            most = max(most, running)
        try:
            if item == 0:  # the caller's: waits (as on a slow network) until a helper has done another item
                assert others_ran.wait(30), "no worker joined the caller"
            else:
                others_ran.set()
                time.sleep(0.05)
            return threading.get_ident()
        finally:
            with counting:
                running -= 1

    idents = run_all(work, list(range(8)), workers=3)
    assert idents[0] == threading.get_ident()
    assert len(set(idents)) > 1
    assert most <= 3


def test_ctrl_c_in_the_callers_item_stops_the_others_waiting_and_is_raised_as_it_came(monkeypatch):
    # Failed before: after Ctrl-C the run waited for the started items to end (a request to a silent server: its whole
    # timeout) and raised the earliest item's failure, which could be one the interrupt caused.
    monkeypatch.setattr(parallel, "ALONE", 0.01)  # the helpers join at once
    stop = threading.Event()
    helpers_waiting = threading.Barrier(3, timeout=5)

    def work(item: int) -> int:
        if threading.current_thread() is threading.main_thread():
            helpers_waiting.wait()  # both helpers are inside an item
            raise KeyboardInterrupt
        helpers_waiting.wait()
        if not stop.wait(30):  # a request that only the interruption ends
            raise AssertionError("on_interrupt was not called")
        raise RuntimeError(f"item {item}: the command was interrupted")

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_all(work, [0, 1, 2, 3], workers=3, on_interrupt=stop.set)
    assert stop.is_set() and time.monotonic() - start < 20
