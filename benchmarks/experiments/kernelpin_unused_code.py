"""What a cold load and a warm online one-liner would gain from importing only the code they run (issue 53).

    python -m benchmarks.experiments.kernelpin_unused_code [--pairs 12]

The question: would cutting kernelpin's modules apart, so that a load path imports only the functions it calls,
bring these paths within 2x of their floors (benchmarks/cold_paths.py)? Its upper bound, measured: the test Hub of
benchmarks.cold_paths (HubApp) serves one kernel; a profiled run of each path records every kernelpin function it
calls (in any thread); a copy of kernelpin is made for each path in which every function that path does not call
is gone (`def f(...)` becomes `f = None`, methods too: no code object, no function is left of it), compiled. Then
each path runs in fresh processes in alternating pairs: the checkout's kernelpin against its copy, and against
the checkout with the collector off from the clock's start (gc.disable() in that process only: how much of the
path is garbage collection). Prints each arm's median and the median of the per-pair ratios, [min-max].
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.cold_paths import REPO_ROOT
from benchmarks.experiments.alternating import Arm, lab_app, time_paths

# Every kernelpin function a call runs, in any thread: (path below kernelpin/, first line of its code).
_RECORD_CALLED = """\
import json, sys, threading
import torch
called = set()
def profile(frame, event, arg):
    if event == "call" and "/kernelpin/" in frame.f_code.co_filename:
        called.add((frame.f_code.co_filename.rsplit("/kernelpin/", 1)[1], frame.f_code.co_firstlineno))
sys.setprofile(profile)
threading.setprofile(profile)
exec(sys.argv[1])
sys.setprofile(None)
print("CALLED " + json.dumps(sorted(called)))
"""

_COLLECTOR_OFF = "import gc\ngc.disable()\n"  # in the timed process only, from the clock's start


class _WithoutUncalled(ast.NodeTransformer):
    """Each function (or method) the path never called replaced by `name = None`."""

    def __init__(self, module: str, called: set[tuple[str, int]]) -> None:
        self.module, self.called = module, called

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        # A function's code starts at its first decorator.
        first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
        if (self.module, first) not in self.called:
            return ast.copy_location(
                ast.Assign(targets=[ast.Name(id=node.name, ctx=ast.Store())], value=ast.Constant(None)), node
            )
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef


def without_uncalled(called: set[tuple[str, int]], into: Path) -> Path:
    """A copy of the checkout's kernelpin package in `into` without the functions not in `called`, compiled."""
    package = into / "kernelpin"
    shutil.copytree(REPO_ROOT / "kernelpin", package, ignore=shutil.ignore_patterns("__pycache__"))
    for source in package.rglob("*.py"):
        tree = _WithoutUncalled(source.relative_to(package).as_posix(), called).visit(ast.parse(source.read_text()))
        source.write_text(ast.unparse(ast.fix_missing_locations(tree)))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=12, help="alternating pairs per arm and path")
    pairs = parser.parse_args().pairs
    with lab_app("kernelpin-unused-code-") as app:

        def arms(call: str, home: str) -> tuple[str, dict[str, Arm]]:
            recorded = app.run([sys.executable, "-c", _RECORD_CALLED, call], home)
            if recorded.returncode != 0:
                raise SystemExit(f"recording failed:\n{recorded.stderr[-3000:]}")
            called = {(module, line) for module, line in json.loads(recorded.stdout.split("CALLED ", 1)[1])}
            copy = str(without_uncalled(called, app.work / f"without-uncalled-{home}"))
            return f" ({len(called)} kernelpin functions called)", {
                "checkout": ("", None),
                "uncalled functions gone": ("", copy),
                "collector off": (_COLLECTOR_OFF, None),
            }

        time_paths(app, pairs, arms)


if __name__ == "__main__":
    main()
