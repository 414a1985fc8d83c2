"""Mutation testing of kernelpin's checks: would a test notice if one stopped refusing? (run by hand, not CI)

    python -m tools.maintainer.mutation                         # integrity, lockfile, loader, ranges; 2 workers
    python -m tools.maintainer.mutation --modules integrity     # one module
    python -m tools.maintainer.mutation --max-children 8        # on a bigger machine

mutmut (https://github.com/boxed/mutmut) changes one operator, constant or argument at a time in the modules
named and runs the tests that cover the changed function; a mutant that no test fails on "survived": a check
no test would notice losing. Prints killed / survived / other per module, lists the survivors (`mutmut show
NAME` in the work directory prints one's diff) and exits 0: surviving mutants are for a person to judge
(some are equivalent: e.g. a changed error-message string that no test quotes).

mutmut runs the tests in its own interpreter, so it needs the project's dependencies next to its own: the
first run makes a virtual environment (--venv) with mutmut pinned, that also sees the packages of the Python
running this script (a .pth file naming its site-packages); the project's environment is not changed. The
tree is copied into --work (mutmut writes its mutants/ beside the code) with a [tool.mutmut] section added
to the copy's pyproject.toml, so the checkout is never touched.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import sysconfig
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MUTMUT = "mutmut==3.8.1"
MODULES = ("files.integrity", "format.lockfile", "loading.loader", "format.ranges")  # dotted, below kernelpin
# The tests that exercise those modules directly and quickly: mutmut runs, per mutant, the tests its first pass
# saw call the mutated function, and a test that starts a Hub server (olah) costs seconds per mutant.
TESTS = (
    "tests/kernelpin/files/test_integrity.py",
    "tests/kernelpin/loading/test_loader.py",
    "tests/kernelpin/format/test_ranges.py",
)
# Needs node-semver from `./dev setup`, which the copy does not carry; it checks agreement with npm, not kernelpin.
DESELECT = ("tests/kernelpin/format/test_ranges.py::test_node_semver_agrees_except_where_documented",)
COPIED = ("kernelpin", "testkit", "tests", "tools", "docs", "pyproject.toml")  # docs: tests read its examples
# mutmut names a mutant kernelpin.<room>.<module>.<function>__mutmut_<n> (or kernelpin.<module>.... at the top).
RESULT = re.compile(r"^\s*kernelpin\.(?P<module>(?:\w+\.)?\w+)\.(?P<mutant>x\S+): (?P<status>.+)$")


def ensure_mutmut(venv: Path) -> Path:
    """mutmut in `venv`, which also sees this interpreter's packages; returns the mutmut executable."""
    executable = venv / "bin" / "mutmut"
    if executable.exists():
        return executable
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", MUTMUT], check=True)
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Appended after mutmut's own site-packages: its pinned dependencies win, the project's fill the rest.
    (Path(site) / "project-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return executable


MEMORY_LIMIT = (
    3 << 30
)  # bytes of address space per process: a mutant that loops appending (e.g. in _tokenize) stops there


def limit_memory() -> None:
    """In mutmut and the mutant processes it forks: a runaway mutant fails with MemoryError (and counts as
    killed) instead of filling a shared machine's memory."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def mutmut_config(modules: Sequence[str], tests: Sequence[str]) -> str:
    def toml_list(items: Sequence[str]) -> str:
        return "[" + ", ".join(f'"{item}"' for item in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["kernelpin"]\n'
        'also_copy = ["testkit", "tools", "docs"]\n'  # mutmut runs the tests in its mutants/ copy; tests import testkit and read docs/
        f"only_mutate = {toml_list(['kernelpin/' + module.replace('.', '/') + '.py' for module in modules])}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
        f"pytest_add_cli_args = {toml_list(['-p', 'no:xdist', '-p', 'no:cacheprovider', *[f'--deselect={d}' for d in DESELECT]])}\n"
    )


def prepare(work: Path, modules: Sequence[str], tests: Sequence[str]) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__", "node_modules", "*.so"))
        else:
            shutil.copy2(source, work / name)
    with open(work / "pyproject.toml", "a", encoding="utf-8") as stream:
        stream.write(mutmut_config(modules, tests))


def scores(results: str) -> tuple[dict[str, Counter[str]], list[str]]:
    """Per module, how many mutants ended how; and the survivors' names."""
    by_module: dict[str, Counter[str]] = {}
    survivors = []
    for line in results.splitlines():
        found = RESULT.match(line)
        if found is None:
            continue
        by_module.setdefault(found["module"], Counter())[found["status"]] += 1
        if found["status"] == "survived":
            survivors.append(f"kernelpin.{found['module']}.{found['mutant']}")
    return by_module, survivors


def report(by_module: dict[str, Counter[str]]) -> str:
    lines = [f"{'module':<20} {'mutants':>8} {'killed':>8} {'survived':>9} {'other':>6}  score"]
    for module, counts in sorted(by_module.items()):
        total = sum(counts.values())
        killed, survived = counts["killed"], counts["survived"]
        other = total - killed - survived  # timeouts, suspicious, not checked (no test covers the line)
        score = f"{killed / (killed + survived):.0%}" if killed + survived else "-"
        lines.append(f"{module:<20} {total:>8} {killed:>8} {survived:>9} {other:>6}  {score}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--modules",
        nargs="+",
        default=list(MODULES),
        choices=sorted(
            ".".join(p.relative_to(REPO / "kernelpin").with_suffix("").parts)
            for p in (REPO / "kernelpin").rglob("*.py")
        ),
        help="kernelpin modules to mutate (default: %(default)s)",
    )
    parser.add_argument("--tests", nargs="+", default=list(TESTS), help="test files to run (default: the direct ones)")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutants (default: 2)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kernelpin-mutation"), help="scratch copy of the tree")
    parser.add_argument(
        "--venv", type=Path, default=Path("/tmp/kernelpin-mutmut-venv"), help="where mutmut is installed"
    )
    args = parser.parse_args(argv)
    mutmut = ensure_mutmut(args.venv)
    prepare(args.work, args.modules, args.tests)
    # The copy's code, never a checkout's that PYTHONPATH may name.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    subprocess.run(
        [str(mutmut), "run", "--max-children", str(args.max_children)],
        cwd=args.work,
        env=env,
        check=True,
        preexec_fn=limit_memory,
    )
    results = subprocess.run(
        [str(mutmut), "results", "--all", "true"], cwd=args.work, env=env, capture_output=True, text=True, check=True
    ).stdout
    by_module, survivors = scores(results)
    print(report(by_module))
    if survivors:
        print(f"\nsurvivors (`cd {args.work} && {mutmut} show NAME` prints the change):")
        print("\n".join(f"  {name}" for name in survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
