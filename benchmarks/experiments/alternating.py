"""What the kernelpin lab scripts share: arms timed in alternating fresh-process rounds, and each set against a base."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping


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
