"""Issue 53: kernelpin imports what a path needs when it needs it. Four paths, each counted in a fresh
interpreter (the modules it adds to a bare one, and kernelpin's own among them): `kernelpin --help`, `import
kernelpin`, a warm offline `kernelpin.load` and the warm online one-liner (kernelpin's own modules). A path that grows past its budget fails here: find the import that
grew it and make it lazy (or raise the budget, saying why). The HTTP stack and rich stay off all three."""

from __future__ import annotations

from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.helpers import TRUSTED_ORG, fresh_interpreter

# The modules each path may add to a bare interpreter, with why that many.
BUDGETS = {
    # argparse and what its help formatter imports (~12, as a bare argparse script's), the cli package and
    # kernelpin.errors; no command module, no console, no Hub settings.
    "help": 22,
    # the package's lazy table only (typing and collections.abc where nothing imported them yet): each name imports
    # its module when first used.
    "import": 6,
    # the lock's reader, the variant choice, the gate and policy, the store's verify, the loader: kernelpin's own
    # modules (below) and the standard library they use (dataclasses, hashlib, json, tomllib, threading ...; here,
    # without torch, importlib.metadata too: the environment asks it for torch's device plugins); kernelpin.records,
    # which makes the 28 record classes on this path without compiling their methods (14 ms less, one module more);
    # kernelpin.loading.local_kernels, LOCAL_KERNELS' reader apart from the local builds' resolver, so that get_kernel
    # can tell light and early whether it will ask the Hub (its refs request then runs beside its imports); not the
    # local builds' resolver, where LOCAL_KERNELS names no kernel.
    "warm_load": 137,
}
# kernelpin's own modules among them (issue 53): the warm load's were 42 before kernels' internals, the download
# pool, the lock writers, capability builds, ZIP builds and importlib.metadata became imports of the paths that
# use them; 37 since format.nesting bounds what the lock and policy readers parse whatever the recursion limit; 38
# with kernelpin.records; 39 with kernelpin.loading.local_kernels; 38 since a lock's load imports the local builds'
# resolver (kernelpin.loading.local_override) only where LOCAL_KERNELS names the kernel it loads.
OWN_BUDGETS = {"help": 3, "import": 1, "warm_load": 38}
# The one-liner `get_kernel(repo, version=1)` warm online (its commit resolved before): 52 of kernelpin's modules
# until 2026-12-07, 47 since what only some calls use is imported by them: signature verification (a commit
# resolved before verifies no bundle), the download pool (every file is cached), the lock file's reader and the
# project writer (no lock is read or written), a moved kernel's status note; 48 with kernelpin.loading.local_kernels.
WARM_ONELINER_OWN = 48
NOT_ON_A_WARM_ONELINER = (
    "kernelpin.trust.signature",
    "kernelpin.store.parallel",
    "kernelpin.store.lockfiles",
    "kernelpin.files.atomic",
    "kernelpin.format.kernel_status",
)
# The HTTP stack and the console: a path served from disk or printing argparse's help needs neither.
NEVER = ("huggingface_hub", "httpx2", "httpcore2", "anyio", "h11", "rich", "sigstore", "torch")
# HTTP libraries beyond the standard library's http.client: importing one after `import torch` costs a full garbage
# collection over torch's objects (issue 53); huggingface_hub.utils imports httpx2. None on a warm offline load, nor
# on the one-liner `get_kernel`, cold or warm online, which sends its requests with http.client (kernelpin.hub.wire).
HTTP_LIBRARIES = ("httpx2", "httpcore2", "h11", "h2", "anyio", "httpx", "httpcore", "requests", "urllib3", "aiohttp")


def _http_libraries(modules: set[str]) -> list[str]:
    return sorted(
        name
        for name in modules
        if name.split(".")[0] in HTTP_LIBRARIES
        or name == "huggingface_hub.utils"
        or name.startswith("huggingface_hub.utils.")
    )


def _added(code: str) -> set[str]:
    _, bare = fresh_interpreter("pass")
    _, modules = fresh_interpreter(code)
    return modules - bare


def _check(path: str, added: set[str]) -> None:
    stack = sorted(name for name in added if name.split(".")[0] in NEVER)
    assert not stack, f"{path} imports {stack}"
    assert len(added) <= BUDGETS[path], f"{path}: {len(added)} modules > budget {BUDGETS[path]}: {sorted(added)}"
    own = sorted(name for name in added if name.split(".")[0] == "kernelpin")
    assert len(own) <= OWN_BUDGETS[path], f"{path}: {len(own)} kernelpin modules > budget {OWN_BUDGETS[path]}: {own}"


def test_help_imports_argparse_and_the_dispatch_only():
    _check("help", _added("from kernelpin.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"))


def test_import_kernelpin_imports_its_table_only():
    _check("import", _added("import kernelpin"))


def test_a_warm_offline_load_imports_no_http_stack(img2gray, project, cli, monkeypatch):
    project(f'"{img2gray}" = "^0.1"\n')
    assert cli("lock")[0] == 0 and cli("sync", "--torch", "2.13")[0] == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    printed, _ = fresh_interpreter(f"import kernelpin\nprint(kernelpin.load({img2gray!r}).VERSION)")
    assert printed.split()[0] == "0.1.1"
    added = _added(f"import kernelpin\nkernelpin.load({img2gray!r})")
    _check("warm_load", added)
    assert not _http_libraries(added)
    # Failed before: the local builds' resolver was imported to find that LOCAL_KERNELS is not set.
    assert "kernelpin.loading.local_override" not in added


def test_the_one_liner_cold_and_warm_online_imports_no_http_library_beyond_http_client(
    new_repo, hf_env, monkeypatch, tmp_path
):
    # Failed before: every request went through huggingface_hub's client (httpx2, httpcore2, h11, anyio).
    repo_id, repo = new_repo("budget", "kernel", TRUSTED_ORG)
    publish(repo, "1.0.0", variants=(CPU_213,))
    repo.branch("v1")
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))
    call = f"import kernelpin\nprint(kernelpin.get_kernel({repo_id!r}, version=1).VERSION)"
    for when in ("cold", "warm online"):
        printed, modules = fresh_interpreter(call)
        assert printed.split()[-1] == "1.0.0", printed
        assert "kernelpin.hub.wire" in modules  # it asked the Hub (the refs of the branch, at least)
        assert not _http_libraries(modules), f"{when}: {_http_libraries(modules)}"
    # Failed before (52 modules, these five among them): the warm call imports what it uses.
    own = sorted(name for name in modules if name.split(".")[0] == "kernelpin")
    assert not set(NOT_ON_A_WARM_ONELINER) & set(own), sorted(set(NOT_ON_A_WARM_ONELINER) & set(own))
    assert len(own) <= WARM_ONELINER_OWN, f"warm online one-liner: {len(own)} kernelpin modules: {own}"
