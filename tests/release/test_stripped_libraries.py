"""Issue 28 (8): a library whose section header table was removed still loads (the dynamic loader reads the
program headers only), but the checks that read sections see no imports: the ABI gate refuses it instead of
passing its GLIBC_2.34 import and its libtorch C++ symbol unseen."""

from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess

import pytest

from kernelpin.publisher.abi_gate import AbiError, gate, hides_its_imports
from testkit.fake_kernel import write_variant

pytest.importorskip("kernel_abi_check")

STABLE = "torch-stable-abi210-cpu-x86_64-linux"
# pthread_create is GLIBC_2.34 in libc.so.6 (glibc >= 2.34 builds); c10::f is a libtorch C++ symbol.
SOURCE = """
#include <pthread.h>
namespace c10 { void f(); }
static void *run(void *) { return 0; }
extern "C" int start(int call) { pthread_t t; if (call) c10::f(); return pthread_create(&t, 0, run, 0); }
"""


def without_section_headers(library: bytes) -> bytes:
    """The library with e_shoff, e_shnum and e_shstrndx zeroed, as sstrip leaves it."""
    data = bytearray(library)
    struct.pack_into("<Q", data, 0x28, 0)
    struct.pack_into("<HH", data, 0x3C, 0, 0)
    return bytes(data)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    compiler = shutil.which("g++") or pytest.skip("no g++")
    root = tmp_path_factory.mktemp("stripped")
    (root / "lib.cpp").write_text(SOURCE)
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", str(root / "lib.cpp"), "-o", str(root / "_lib.abi3.so")], check=True
    )
    built = (root / "_lib.abi3.so").read_bytes()
    if b"GLIBC_2.34" not in built:
        pytest.skip("this machine's glibc predates 2.34: pthread_create is not a GLIBC_2.34 import here")
    return built


def test_a_library_without_section_headers_is_refused_not_passed(library, tmp_path):
    # Failed before: the stripped copy passed the gate (0 violations), its imports unseen.
    plain = write_variant(tmp_path / "plain" / STABLE, "1.0.0", STABLE, extra={"_lib.abi3.so": library})
    with pytest.raises(AbiError) as refused:
        gate([plain])
    assert "GLIBC_2.34" in str(refused.value) and "_ZN3c101fEv needs libtorch's C++ ABI" in str(refused.value)
    stripped = write_variant(
        tmp_path / "stripped" / STABLE, "1.0.0", STABLE, extra={"_lib.abi3.so": without_section_headers(library)}
    )
    ctypes.CDLL(str(stripped / "_lib.abi3.so"), mode=os.RTLD_LAZY)  # it still loads (c10::f is bound when called)
    with pytest.raises(
        AbiError,
        match=r"_lib\.abi3\.so: its dynamic symbol table needs a section header \(\.dynsym\) "
        r"to be checked: the section headers were removed",
    ):
        gate([stripped])


def test_only_a_dynamically_linked_elf_without_dynsym_hides_its_imports(library, tmp_path):
    (tmp_path / "lib.so").write_bytes(library)
    (tmp_path / "stripped.so").write_bytes(without_section_headers(library))
    (tmp_path / "not-elf").write_bytes(b"#!/bin/sh\n")
    (tmp_path / "short").write_bytes(b"\x7fELF\x02\x01")
    assert not hides_its_imports(tmp_path / "lib.so") and hides_its_imports(tmp_path / "stripped.so")
    assert not hides_its_imports(tmp_path / "not-elf") and not hides_its_imports(tmp_path / "short")
    static = bytearray(library)  # no PT_DYNAMIC: every program header's p_type made PT_NULL
    (phoff,) = struct.unpack_from("<Q", static, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", static, 0x36)
    for i in range(phnum):
        struct.pack_into("<I", static, phoff + i * phentsize, 0)
    (tmp_path / "static").write_bytes(without_section_headers(bytes(static)))
    assert not hides_its_imports(tmp_path / "static")
