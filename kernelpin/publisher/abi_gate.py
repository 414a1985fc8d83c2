"""The ABI gate: every shared library of a release must meet the Hub's kernel ABI rules.

    python -m kernelpin.publisher.abi_gate DIR...        exit 0 when every ELF file below DIR passes, 1 otherwise

The rules are the ones kernel-builder enforces and `kernels` users rely on: glibc (and libstdc++) symbol
versions allowed by manylinux_2_28, and only Python's stable ABI (abi3) as of Python 3.9. The check is
HF's own checker (PyPI `kernel-abi-check`); `tools/release/stage.py stage` and `kernelpin publish` run it, so a
library that would fail to load on an older system is refused before it reaches the Hub.

A library of a stable-ABI variant (`torch-stable-abi<maj><min>-...`, by its directory's name or metadata.json)
must also keep kernel-abi-check's stable-ABI rule, checked here (the PyPI package's Python API lacks it): no
C++ symbol of libtorch (`c10::`, `at::`, `torch::`), and no C shim newer than the variant's torch
(stable_abi_shims.json, from torch's own headers: tools/release/stable_abi_shims.py).
"""

from __future__ import annotations

import json
import re
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path

from kernelpin.errors import KernelpinError
from kernelpin.format.layout import METADATA
from kernelpin.format.variant import STABLE_ABI, Variant
from kernelpin.records import record

MANYLINUX = "manylinux_2_28"
PYTHON_ABI = "3.9"
_ELF_MAGIC = b"\x7fELF"
_FLOOR_HINT = (
    "build with tools/builder/op.py --glibc-floor 2.28 (the default; csrc/glibc_floor.h) or against glibc 2.28 "
    "headers (a manylinux_2_28 sysroot, as conda-forge and kernel-builder do)"
)


class AbiError(KernelpinError):
    """Shared libraries that break the Hub's ABI rules; the message lists each symbol and what to do."""


@record
class Violation:
    library: str  # path as given to the gate
    symbol: str
    needs: str  # e.g. "GLIBC_2.32", "Python 3.10", "not in the stable ABI"
    advice: str

    def __str__(self) -> str:
        return f"{self.library}: {self.symbol} needs {self.needs}: {self.advice}"


_STATIC_LIBSTDCXX_HINT = (
    "it comes from a copy of libstdc++ linked into the library (it does not need libstdc++.so.6): that "
    "archive was built against the build machine's glibc. Link libstdc++ dynamically, as torch does "
    "(tools/builder/op.py does, even when the compiler driver adds -static-libstdc++)"
)


def advice_for(symbol: str, dependency: str, static_libstdcxx: bool = False) -> str:
    """What to do about one symbol that needs a newer glibc/libstdc++ than manylinux_2_28 allows."""
    if static_libstdcxx and dependency.upper().startswith("GLIBC"):
        return _STATIC_LIBSTDCXX_HINT
    if symbol == "__libc_single_threaded":
        return (
            "libstdc++ reads it when compiled against glibc >= 2.32 headers (<sys/single_threaded.h>); " + _FLOOR_HINT
        )
    if symbol.startswith("__isoc23_"):
        return (
            f"glibc >= 2.38 headers redirect {symbol.removeprefix('__isoc23_')}() there in C23/_GNU_SOURCE "
            "mode; " + _FLOOR_HINT + ", or avoid the strtol/scanf family (std::from_chars)"
        )
    if dependency.upper().startswith("GLIBC"):
        return f"the function is newer than glibc 2.28: avoid it, or {_FLOOR_HINT}"
    return f"{dependency} is newer than {MANYLINUX} allows: build with the manylinux_2_28 toolchain (gcc-toolset) or link it statically"


def needed_libraries(path: Path) -> list[str] | None:
    """The DT_NEEDED entries of a 64-bit little-endian ELF file (x86_64, aarch64), None for any other ELF."""
    data = path.read_bytes()
    if data[:4] != _ELF_MAGIC or data[4] != 2 or data[5] != 1:
        return None
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    segments = [struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize) for i in range(phnum)]
    # (p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz); PT_LOAD = 1 maps addresses, PT_DYNAMIC = 2
    loads = [(vaddr, offset, size) for kind, _, offset, vaddr, _, size in segments if kind == 1]
    dynamic = next(((offset, size) for kind, _, offset, _, _, size in segments if kind == 2), None)
    if dynamic is None:
        return []
    entries = [struct.unpack_from("<qQ", data, dynamic[0] + i) for i in range(0, dynamic[1], 16)]
    strtab = next((value for tag, value in entries if tag == 5), None)  # DT_STRTAB, a virtual address
    if strtab is None:
        return []
    base = next(offset + strtab - vaddr for vaddr, offset, size in loads if vaddr <= strtab < vaddr + size)
    return [data[base + value : data.index(b"\0", base + value)].decode() for tag, value in entries if tag == 1]


def undefined_symbols(path: Path) -> list[str]:
    """The names of the undefined (imported) symbols of a 64-bit little-endian ELF file's .dynsym."""
    data = path.read_bytes()
    if data[:4] != _ELF_MAGIC or data[4] != 2 or data[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link): SHT_DYNSYM = 11
    sections = [struct.unpack_from("<IIQQQQI", data, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _, kind, _, _, offset, size, link in sections:
        if kind != 11:
            continue
        strings = sections[link][4]
        for entry in range(offset, offset + size, 24):
            name, _, _, shndx = struct.unpack_from("<IBBH", data, entry)
            if name and shndx == 0:  # SHN_UNDEF
                names.append(data[strings + name : data.index(b"\0", strings + name)].decode())
    return names


# Itanium-mangled names in namespace c10, at or torch (functions, members, vtables, typeinfo).
_LIBTORCH_CXX = re.compile(r"^_Z(?:T[VIS])?N?[rVKRO]*(?:3c10|2at|5torch)")


@cache
def stable_abi_shims() -> dict[str, tuple[int, int]]:
    """Each C shim of torch's stable ABI -> the torch release that added it."""
    added = json.loads(Path(__file__).with_name("stable_abi_shims.json").read_text())["added"]
    return {name: _release(version) for version, names in added.items() for name in names}


def _release(version: str) -> tuple[int, int]:
    """'2.11' -> (2, 11)."""
    major, minor = version.split(".")
    return int(major), int(minor)


def stable_abi_target(library: Path) -> tuple[int, int] | None:
    """The torch version of the stable-ABI variant a library belongs to (its directory), None for other builds."""
    directory = library.parent
    name = directory.name
    if not name.startswith("torch-stable-abi") and (directory / METADATA).is_file():
        try:
            name = json.loads((directory / METADATA).read_text()).get("variant") or ""
        except (OSError, ValueError):
            return None
    try:
        variant = Variant.parse(name)
    except ValueError:
        return None
    return variant.torch if variant.framework == STABLE_ABI else None


def stable_abi_violations(path: Path, label: str, target: tuple[int, int]) -> list[Violation]:
    """kernel-abi-check's stable-ABI rule for a library built for torch `target` and newer."""
    shims = stable_abi_shims()
    newest = max(shims.values())
    wanted = f"torch {target[0]}.{target[1]}"
    found = []
    for symbol in undefined_symbols(path):
        if _LIBTORCH_CXX.match(symbol):
            found.append(
                Violation(
                    label,
                    symbol,
                    "libtorch's C++ ABI (not in the stable ABI)",
                    "use only torch/csrc/stable and torch/headeronly; a c10::/at::/torch:: symbol "
                    "ties the library to the torch release it was built with",
                )
            )
        elif symbol.startswith(("aoti_torch_", "torch_")):
            added = shims.get(symbol)
            if added is None:
                found.append(
                    Violation(
                        label,
                        symbol,
                        f"a C shim unknown up to torch {newest[0]}.{newest[1]}",
                        f"it is not in the stable ABI of {wanted}; avoid it",
                    )
                )
            elif added > target:
                found.append(
                    Violation(
                        label,
                        symbol,
                        f"torch {added[0]}.{added[1]} (a shim newer than the variant's {wanted})",
                        f"build with -DTORCH_TARGET_VERSION for {wanted} (tools/builder/op.py --abi "
                        "stable does), which hides newer shims, or raise the variant's stable ABI",
                    )
                )
    return found


def hides_its_imports(path: Path) -> bool:
    """A 64-bit little-endian ELF file the dynamic loader links (it has a PT_DYNAMIC segment) whose section
    header table names no .dynsym (SHT_DYNSYM): removed or rewritten, say by `sstrip`. The loader reads only
    the program headers, so the library still loads, but kernel-abi-check and undefined_symbols read sections
    and would see no imports at all."""
    data = path.read_bytes()
    if data[:4] != _ELF_MAGIC or data[4] != 2 or data[5] != 1 or len(data) < 0x40:
        return False
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    kinds = [
        struct.unpack_from("<I", data, phoff + i * phentsize)[0]
        for i in range(phnum)
        if phoff + (i + 1) * phentsize <= len(data)
    ]
    if 2 not in kinds:  # PT_DYNAMIC: nothing for the loader to link
        return False
    sections = [
        struct.unpack_from("<I", data, shoff + i * shentsize + 4)[0]
        for i in range(shnum)
        if shoff and shoff + (i + 1) * shentsize <= len(data)
    ]
    return 11 not in sections  # SHT_DYNSYM


def links_libstdcxx_statically(path: Path) -> bool:
    """A C++ library that does not need libstdc++.so.6 carries its own copy of (part of) libstdc++."""
    needed = needed_libraries(path)
    if needed is None or any(name.startswith("libstdc++.so") for name in needed):
        return False
    return b"_ZNSt" in path.read_bytes() or b"_ZSt" in path.read_bytes()


def shared_libraries(roots: Iterable[Path]) -> list[Path]:
    """Every ELF file below the roots (by content, whatever its name), sorted."""
    found = []
    for root in roots:
        candidates = (
            [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        )
        for path in candidates:
            with open(path, "rb") as stream:
                if stream.read(4) == _ELF_MAGIC:
                    found.append(path)
    return found


def check_library(path: Path, label: str | None = None) -> list[Violation]:
    """The violations of one ELF file (empty when it passes)."""
    try:
        from kernel_abi_check import IncompatibleAbi3Symbol, ObjectFile
    except ImportError:
        raise AbiError(
            f"{path} is a shared library and checking it needs HF's ABI checker: pip install kernel-abi-check==0.14.1"
        ) from None
    label = label or str(path)
    if hides_its_imports(path):
        return [
            Violation(
                label,
                "its dynamic symbol table",
                "a section header (.dynsym) to be checked",
                "the section headers were removed or rewritten (e.g. by sstrip): the library still loads, "
                "but what it imports cannot be checked. Ship it as the linker wrote it (strip -s keeps them)",
            )
        ]
    try:
        library = ObjectFile(str(path))
        manylinux = library.check_manylinux(MANYLINUX)
        python = library.check_python_abi(PYTHON_ABI)
    except (OSError, ValueError) as error:
        raise AbiError(f"{label}: cannot be checked as a shared library ({error}); is it a broken build?") from None
    static_libstdcxx = bool(manylinux) and links_libstdcxx_statically(path)
    found = [
        Violation(label, v.name, f"{v.dep}_{v.version}", advice_for(v.name, v.dep, static_libstdcxx)) for v in manylinux
    ]
    if target := stable_abi_target(path):
        found += stable_abi_violations(path, label, target)
    for symbol in python:
        if isinstance(symbol, IncompatibleAbi3Symbol):
            found.append(
                Violation(
                    label,
                    symbol.name,
                    f"Python {symbol.version_added}",
                    f"not in the stable ABI of Python {PYTHON_ABI}: avoid it or raise Py_LIMITED_API's floor",
                )
            )
        else:
            found.append(
                Violation(
                    label,
                    symbol.name,
                    "the full Python C API (not abi3)",
                    "build with Py_LIMITED_API=0x03090000 (abi3) and use only the stable ABI",
                )
            )
    return found


def refusal(violations: Sequence[Violation]) -> AbiError:
    lines = "\n  ".join(str(v) for v in violations)
    return AbiError(
        f"{len(violations)} ABI violation(s) of the Hub's kernel rules ({MANYLINUX}, abi3 for Python >= {PYTHON_ABI}):"
        f"\n  {lines}\nSuch a library does not load on every system `kernels` supports; rebuild it as said above."
    )


def gate(roots: Sequence[Path], relative_to: Path | None = None) -> int:
    """Raise AbiError listing every violation below the roots; return how many libraries passed."""
    libraries = shared_libraries(roots)
    violations = [
        v
        for library in libraries
        for v in check_library(library, str(library.relative_to(relative_to)) if relative_to else None)
    ]
    if violations:
        raise refusal(violations)
    return len(libraries)


def passed_message(count: int) -> str:
    libraries = "1 shared library meets" if count == 1 else f"{count} shared libraries meet"
    return f"ABI gate passed: {libraries} {MANYLINUX} and abi3 (Python >= {PYTHON_ABI})"


def main(
    argv: Sequence[str] | None = None,
    prog: str = "python -m kernelpin.publisher.abi_gate",
    description: str | None = __doc__,
    check: Callable[[Sequence[Path]], int] | None = None,
) -> int:
    """The ABI gate's one command line: 0 and the passed message, or 1 and every violation. `check` maps the paths
    given to the number of libraries that passed, raising KernelpinError (default: `gate`, missing paths exit 2);
    tools/release/abi_gate.py passes one that unpacks conda packages first."""
    import argparse

    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="DIR", help="release layouts, variant dirs or libraries")
    args = parser.parse_args(argv)
    if check is None:
        missing = [str(p) for p in args.paths if not p.exists()]
        if missing:
            print(f"error: no such file or directory: {', '.join(missing)}", file=sys.stderr)
            return 2
        check = gate
    try:
        passed = check(args.paths)
    except KernelpinError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(passed_message(passed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
