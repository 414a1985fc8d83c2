"""What a cold load and a warm online one-liner would gain from kernelpin's load-path modules compiled (issue 53).

    python -m benchmarks.experiments.kernelpin_compiled [--pairs 15]

The question: black and mypy ship wheels built by mypyc, which compiles typed Python modules into C extensions;
would kernelpin's load paths, built that way, come within 2x of their floors (benchmarks/cold_paths.py)? A copy of
the checkout's kernelpin is made in which COMPILED, the modules of these paths that mypyc compiles into code that
still loads, are C extensions (mypyc from the venv's mypy; the rest stays Python, compiled to bytecode). A cold
load and a get_kernel of the test Hub of benchmarks.cold_paths (HubApp) must work with it; then each path runs in
fresh processes in alternating pairs, the checkout against the copy. Prints each arm's median and the median of
the per-pair ratios, [min-max]. Building takes a few minutes (mypyc type-checks what the modules import).

NOT_COMPILED says why the other modules of these paths are left as Python (mypyc 2.4.1 under Python 3.11): refused
as written, or compiled into code that behaves otherwise, which the loads above show.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.cold_paths import REPO_ROOT
from benchmarks.experiments.alternating import lab_app, load_paths, time_paths

COMPILED = (
    "errors.py",
    "environment.py",
    "files/confined.py",
    "files/integrity.py",
    "files/private_state.py",
    "format/layout.py",
    "format/lockfile.py",
    "format/metadata.py",
    "format/nesting.py",
    "format/ranges.py",
    "format/spec.py",
    "hub/limits.py",
    "hub/listing.py",
    "hub/request_headers.py",
    "hub/throttle.py",
    "loading/importing.py",
    "loading/loader.py",
    "loading/local_kernels.py",
    "loading/provenance.py",
    "loading/python_depends.py",
    "loading/runtime.py",
    "store/content.py",
    "store/lockfiles.py",
    "store/parallel.py",
    "store/receipts.py",
    "trust/gate.py",
    "trust/policy.py",
)
NOT_COMPILED = {
    "records.py": "mypyc takes `if TYPE_CHECKING:` as always true, so the branch that runs is compiled as unreachable "
    "(RuntimeError: Reached allegedly unreachable code!, at import)",
    "format/signer.py": "an internal mypyc error (AssertionError) on a closure in a method of a record class",
    "front/lock.py": "the same internal error",
    "loading/local_override.py": "the same internal error",
    "loading/front.py": "KeyError: 'object' at import (a record field annotated `object`)",
    "format/variant.py": "two equal records compare unequal: a CPU build is refused on a CPU machine (`CPU build, "
    "this machine's backend is CPU`)",
    "hub/source.py": "an exception check compiled otherwise (TypeError: kernelpin.errors.KernelpinError object "
    "expected; got TypeError, in translate_errors)",
    "hub/wire.py": "its connections are native classes, which take no weak reference (TypeError: cannot create weak "
    "reference to 'Wire' object); it builds only with its TimeoutError subclass marked non-native",
}
# A subclass of a built-in exception builds only as a non-native class.
_NON_NATIVE = {"format/nesting.py": "class NestedTooDeep(RecursionError):"}


def compiled_copy(into: Path) -> Path:
    """A copy of the checkout's kernelpin package in `into` with COMPILED built by mypyc, the rest compiled to
    bytecode."""
    package = into / "kernelpin"
    shutil.copytree(REPO_ROOT / "kernelpin", package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for module, statement in _NON_NATIVE.items():
        source = package / module
        text = source.read_text()
        assert statement in text, f"{module} no longer defines {statement!r}"
        text = text.replace(statement, f"@mypyc_attr(native_class=False)\n{statement}", 1)
        future = "from __future__ import annotations\n"
        source.write_text(text.replace(future, f"{future}from mypy_extensions import mypyc_attr\n", 1))
    mypyc = Path(sys.executable).parent / "mypyc"
    if not mypyc.exists():
        raise SystemExit(f"no mypyc beside {sys.executable}: it comes with mypy (`./dev setup` installs it)")
    built = subprocess.run(
        [str(mypyc), "--ignore-missing-imports", *(f"kernelpin/{module}" for module in COMPILED)],
        cwd=into,
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise SystemExit(f"mypyc failed:\n{built.stdout[-3000:]}{built.stderr[-3000:]}")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=15, help="alternating pairs per path")
    pairs = parser.parse_args().pairs
    with lab_app("kernelpin-compiled-") as app:
        copy = str(compiled_copy(app.work / "compiled"))
        extensions = (
            "import sys\nprint('EXTENSIONS', sum((getattr(module, '__file__', None) or '').endswith('.so') "
            "for name, module in list(sys.modules.items()) if name.startswith('kernelpin')))"
        )
        print("not compiled:")
        for module, why in NOT_COMPILED.items():
            print(f"  {module}: {why}")
        print(f"compiled by mypyc: {len(COMPILED)} modules")
        for path, call in load_paths(app).items():  # each works with the copy (a cold load first), importing extensions
            checked = app.run([sys.executable, "-c", f"import torch\n{call}\n{extensions}"], "check", pythonpath=copy)
            if checked.returncode != 0 or "EXTENSIONS" not in checked.stdout:
                raise SystemExit(f"the compiled copy fails:\n{checked.stderr[-3000:]}")
            print(f"  {path}: works, {checked.stdout.split('EXTENSIONS')[1].strip()} of them imported")
        time_paths(app, pairs, lambda call, home: ("", {"checkout": ("", None), "compiled": ("", copy)}))


if __name__ == "__main__":
    main()
