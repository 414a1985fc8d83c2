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


def cpu_family_model(cpuinfo: str) -> str | None:
    """x86's `cpu family` and `model` of /proc/cpuinfo, e.g. "family 6 model 207" (an Emerald Rapids Xeon; a KVM guest
    may name the CPU only "Intel(R) Xeon(R) Processor"), or None where the system gives neither."""
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("cpu family", "model") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    if "cpu family" not in fields or "model" not in fields:
        return None
    return f"family {fields['cpu family']} model {fields['model']}"


# The folders of the 2-core guests the CPU records came from (benchmarks/results/cpu-<name>), by vendor, family and
# model (None: every model of the family). A machine is its CPU and its core count: the H100 machine's host has the
# Emerald Rapids of cpu-xeon-emr with 16 cores, and its records must not land on the guest's.
KNOWN_GUESTS = {
    ("GenuineIntel", "6", "207"): "xeon-emr",  # Emerald Rapids
    ("AuthenticAMD", "26", None): "zen5",
}
KNOWN_GUEST_CORES = 2


def results_folder(cpuinfo: str, cores: int) -> str:
    """The folder under benchmarks/results/ for this machine's CPU records: cpu-<name> for a 2-core guest of
    KNOWN_GUESTS, else cpu-<vendor>-family<F>-model<M>-<cores>-cores on x86, else cpu-<architecture>-<cores>-cores."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("vendor_id", "cpu family", "model") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    vendor, family, model = fields.get("vendor_id"), fields.get("cpu family"), fields.get("model")
    if not (vendor and family and model):
        return f"cpu-{platform.machine().lower() or 'unknown'}-{cores}-cores"
    name = KNOWN_GUESTS.get((vendor, family, model)) or KNOWN_GUESTS.get((vendor, family, None))
    if name and cores == KNOWN_GUEST_CORES:
        return f"cpu-{name}"
    short_vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(vendor, vendor.lower())
    return f"cpu-{short_vendor}-family{family}-model{model}-{cores}-cores"


def this_results_folder() -> str:
    """results_folder of this machine's /proc/cpuinfo and core count."""
    return results_folder(CPUINFO.read_text() if CPUINFO.is_file() else "", os.cpu_count() or 1)


def this_cpu() -> str:
    """This machine's CPU model where the system names it (with x86's family and model), else what platform knows."""
    cpuinfo = CPUINFO.read_text() if CPUINFO.is_file() else ""
    model = cpu_model(cpuinfo)
    family = cpu_family_model(cpuinfo)
    if model and family:
        return f"{model} ({family})"
    return model or platform.processor() or platform.machine()


def description() -> str:
    """One line for a record: the CPU model, architecture, cores and Python (ratios differ between CPUs)."""
    return f"{this_cpu()}, {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
