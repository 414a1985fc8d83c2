"""What machine a benchmark ran on, as its records name it: the CPU model, the architecture and core count, Python."""

from __future__ import annotations

import os
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: str) -> str | None:
    """The `model name` of /proc/cpuinfo (Linux x86 and most others), e.g. "AMD EPYC 9454 48-Core Processor"."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return None


def this_cpu() -> str:
    """This machine's CPU model where the system names it, else what platform knows."""
    model = cpu_model(CPUINFO.read_text()) if CPUINFO.is_file() else None
    return model or platform.processor() or platform.machine()


def description() -> str:
    """One line for a record: the CPU model, architecture, cores and Python (ratios differ between CPUs)."""
    return f"{this_cpu()}, {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
