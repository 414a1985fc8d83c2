"""Issue 28 (11, 12): text and names from a server. Nothing kernelpin prints acts on a terminal (control
characters are escaped, paths holding them are refused), and a name a file system cannot store is refused
where it enters (the listing, the lock), by its length, never a raw OSError later."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.store import lockfiles
from kernelpin.terminal import SafeConsole, printable
from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.faulty_hub import HostileHub, Lies
from tests.kernelpin.hub.test_hub_answers import locked, one_line_error  # noqa: F401 (a fixture)

ESCAPES = "\x1b[2J\x1b[31mcleared\r\nerror: faked line\u202egnp.exe\x07"


@pytest.fixture(scope="module")
def released(hub) -> tuple[str, str]:
    """A kernel repository of this module's own, with one release."""
    repo_id = "acme/text-target"
    return repo_id, publish(hub.repo(repo_id, "kernel"), "1.0.0", variants=(CPU_213,))


def tree(path: str) -> list[dict]:
    return [
        {"type": "file", "path": "build/torch213-cxx11-cpu-x86_64-linux/__init__.py", "size": 1, "oid": "0" * 40},
        {"type": "file", "path": path, "size": 1, "oid": "0" * 40},
    ]


def test_the_consoles_escape_every_string_they_render():
    # rich passes ESC, CR and direction overrides through to the terminal; kernelpin's consoles do not.
    stream = io.StringIO()
    console = SafeConsole(file=stream, force_terminal=True, width=300, markup=False, highlight=False)
    table = Table("name", title=f"title {ESCAPES}")
    table.add_row(f"cell {ESCAPES}")
    console.print(f"message {ESCAPES}", style="red")
    console.print(table)
    shown = stream.getvalue()
    assert shown.count("\\x1b[2J\\x1b[31mcleared\\x0d") == 3 and shown.count("\\u202egnp.exe\\x07") == 3
    assert "\x1b[2J" not in shown and not set(shown) & set("\r\u202e\x07")
    assert "\x1b[31m" in shown  # rich's own styling still reaches the terminal


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        (f"build/torch213-cxx11-cpu-x86_64-linux/{ESCAPES}", "contains a control character"),
        ("build/torch213-cxx11-cpu-x86_64-linux/" + "n" * 300, "has a 300-byte name, more than the 255"),
        ("build/torch213-cxx11-cpu-x86_64-linux/" + "/".join(["d" * 200] * 3), "more than the 512 a path may have"),
    ],
)
def test_a_listed_path_that_would_act_on_a_terminal_or_cannot_be_stored_is_refused(
    hub, locked, cli, monkeypatch, path, problem
):
    # Failed before: locked, printed raw, and never syncable (ENAMETOOLONG).
    with HostileHub(hub.endpoint, Lies(tree=tree(path))) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock", "--upgrade")
    one_line_error(status, err, "refusing unsafe path", problem)
    assert "\x1b" not in err


def test_a_lock_with_a_path_no_file_system_stores_is_refused_when_read(released, locked, cli):
    # Failed before: load raised a raw OSError (File name too long).
    lock_path = locked / "kernelpin.lock"
    (kernel,) = lockfiles.read(lock_path).kernels
    lock_path.write_text(lock_path.read_text().replace('"_impl.py"', f'"{"x" * 300}.py"'))
    with pytest.raises(KernelpinError, match=r"refusing unsafe path 'xxx.*\(303 characters\) \(it has a 303-byte name"):
        kernelpin.load(kernel.repo_id, lock=locked)
    one_line_error(*cli("sync", "--torch", "2.13")[::2], "has a 303-byte name")


def test_printable_escapes_what_acts_on_a_terminal_and_keeps_the_rest():
    assert printable(ESCAPES) == ("\\x1b[2J\\x1b[31mcleared\\x0d\nerror: faked line\\u202egnp.exe\\x07")
    assert printable("caf\u00e9 \u4e2d tab\tnew\nline \U0001f600") == "caf\u00e9 \u4e2d tab\tnew\nline \U0001f600"
    assert printable("\x00\x9f\x7f\u2066\u200f\u061c") == "\\x00\\x9f\\x7f\\u2066\\u200f\\u061c"
