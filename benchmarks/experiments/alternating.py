"""What the kernelpin lab scripts share: the cold paths' test Hub and application set up for a run, arms timed in
alternating fresh-process rounds on each load path, and each arm set against the checkout."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from benchmarks.cold_paths import REPO_ROOT, HubApp

# An arm: the code run before the clock starts (TIMED's `before`) and the copy of kernelpin put before the checkout
# (None: the checkout's own).
Arm = tuple[str, str | None]


@contextmanager
def lab_app(prefix: str) -> Iterator[HubApp]:
    """The cold paths' test Hub and application in a directory of their own, locked, with the checkout's kernelpin
    compiled to bytecode (as an installed package has it); the Hub stopped and the directory removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    app = HubApp(work)
    try:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO_ROOT / "kernelpin")], check=True)
        app.lock()
        yield app
    finally:
        app.server.stop()
        shutil.rmtree(work, ignore_errors=True)


def load_paths(app: HubApp) -> dict[str, str]:
    """The paths the lab compares arms on, each with its call."""
    return {"cold load": app.load_call, "warm online one-liner": app.oneliner_call}


def alternating(arms: Mapping[str, Callable[[], float]], pairs: int) -> dict[str, list[float]]:
    """Each arm's seconds over `pairs` rounds, every arm once a round in turn; a first round warms the caches and
    is not counted."""
    samples: dict[str, list[float]] = {arm: [] for arm in arms}
    for _ in range(pairs + 1):
        for arm, measure in arms.items():
            samples[arm].append(measure())
    return {arm: values[1:] for arm, values in samples.items()}


def against(samples: Mapping[str, list[float]], base: str) -> list[str]:
    """`base`'s median, then every other arm's with the median of its per-round ratios to `base` [min-max]."""
    lines = [f"  {base}: {statistics.median(samples[base]) * 1000:.1f} ms"]
    for arm, values in samples.items():
        if arm == base:
            continue
        ratios = sorted(b / a for a, b in zip(samples[base], values, strict=True))
        lines.append(
            f"  {arm}: {statistics.median(values) * 1000:.1f} ms, **{statistics.median(ratios):.2f}x** "
            f"[{ratios[0]:.2f}-{ratios[-1]:.2f}] the {base}'s"
        )
    return lines


def time_paths(app: HubApp, pairs: int, arms_for: Callable[[str, str], tuple[str, Mapping[str, Arm]]]) -> None:
    """On each load path, its arms timed in `pairs` alternating rounds and printed against the "checkout" arm. A cold
    load runs in a home emptied before every timed run; the warm online one-liner in a home where it ran once cold
    first. `arms_for(call, home)` (called once the home is ready) gives what the path's heading adds and its arms."""
    for path, call in load_paths(app).items():
        cold = path == "cold load"
        home = "cold" if cold else "warm"
        app.fresh(home)
        if not cold:  # the cold call first: what is timed is the warm one
            app.timed(call, home)

        def measure(before: str, where: str | None, call: str = call, home: str = home, cold: bool = cold) -> float:
            if cold:
                app.fresh(home)
            return app.timed(call, home, before, pythonpath=where)

        heading, arms = arms_for(call, home)
        samples = alternating({arm: partial(measure, *how) for arm, how in arms.items()}, pairs)
        print(f"{path}{heading}, {pairs} pairs:")
        print("\n".join(against(samples, "checkout")))
