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


# Short names of the CPUs the records already have folders for (benchmarks/results/cpu-<name>), by vendor, family and
# model (None: every model of the family); any other CPU is named by its vendor, family and model.
KNOWN_CPUS = {
    ("GenuineIntel", "6", "207"): "xeon-emr",  # Emerald Rapids
    ("GenuineIntel", "6", "143"): "xeon-spr",  # Sapphire Rapids
    ("AuthenticAMD", "25", "17"): "zen4",  # Genoa
    ("AuthenticAMD", "26", None): "zen5",
}


def results_folder(cpuinfo: str) -> str:
    """The folder under benchmarks/results/ for this CPU's records: cpu-<name> (KNOWN_CPUS), else
    cpu-<vendor>-family<F>-model<M> for x86, else cpu-<architecture>."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("vendor_id", "cpu family", "model") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    vendor, family, model = fields.get("vendor_id"), fields.get("cpu family"), fields.get("model")
    if vendor and family and model:
        name = KNOWN_CPUS.get((vendor, family, model)) or KNOWN_CPUS.get((vendor, family, None))
        short_vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(vendor, vendor.lower())
        return f"cpu-{name or f'{short_vendor}-family{family}-model{model}'}"
    return f"cpu-{platform.machine().lower() or 'unknown'}"


def this_results_folder() -> str:
    """results_folder of this machine's /proc/cpuinfo."""
    return results_folder(CPUINFO.read_text() if CPUINFO.is_file() else "")


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
