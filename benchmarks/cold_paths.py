"""kernelpin's cold paths beside `kernels` and beside their floors, pair by pair (issue 53).

Four paths, each in fresh processes, the tools and the floor alternating round by round so that all see the same
machine state:
- start-up: `kernelpin --help` against `kernels --help` and against its floor, a standard-library argparse script
  that prints the same help (the whole process timed, from outside);
- cold load (empty Hub cache): `kernelpin.load(repo, lock=...)` against `kernels.get_locked_kernel(repo,
  lockfile=...)`, floor: the lock read (tomllib) for the variant's files and hashes, the same files fetched with
  http.client, written, each hashed once, and the package imported (until 2026-12-07 the floor took the hashes
  from its arguments, but no load knows what to fetch without reading the lock);
- warm load, HF_HUB_OFFLINE=1: `kernelpin.load` against `kernels.load_kernel` (no floor: a target of 0.5x only);
- warm online one-liner: `get_kernel(repo, version=1)` of both after a cold one in the same home, floor: the one
  request kernelpin sends (its refs) with http.client, its answer read for the commit of version 1's branch, a
  sha256 of that commit's cached files and the import.
The paths that need torch import it before the clock starts: the times are beyond `import torch`.

Each round gives a ratio kernelpin / kernels and kernelpin / floor; the record keeps every sample, the medians,
the spread (min-max) of the per-round ratios and each median ratio over its target (the limit: 1.0 or less
meets it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks import machine
from kernelpin.format import lockfile
from testkit.fake_kernel import CPU_213, VARIANTS, publish
from testkit.hub import HubServer

REPO_ROOT = Path(__file__).resolve().parents[1]
LIBRARY_BYTES = 1 << 20  # a 1 MiB library beside each variant's Python files, as a small compiled kernel has
# The targets of issue 53: kernelpin's time over kernels' at most this, and over its floor at most FLOOR_TARGET.
TARGETS = {"startup": 0.2, "cold_load": 0.3, "warm_load": 0.5, "warm_oneliner": 0.5}
FLOOR_TARGET = 2.0

# A call timed in a process of its own (after `import torch`, and `before`): its seconds printed last (seconds()).
TIMED = """\
import importlib, json, sys, time
import torch
{before}start = time.perf_counter()
{call}
print("SECONDS", time.perf_counter() - start)
"""
# kernelpin's work alone: the same call with the modules it imports (recorded from a run of its own, the JSON list
# in argv[1]) imported before the clock starts. Its time over the floor is work; the path's time beyond it, importing.
_IMPORTED_FIRST = """\
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
"""

# The modules a call imports beyond torch's (the kernel's own excepted), as it imports them: each with its source
# file (None: none, a built-in or extension module) and whether it is a package.
_RECORD_MODULES = """\
import json, sys
import torch
before = set(sys.modules)
exec(sys.argv[1])
print("MODULES " + json.dumps({
    name: [getattr(module.__spec__, "origin", None), hasattr(module, "__path__")]
    for name, module in list(sys.modules.items())
    if name not in before and not name.startswith("_kernelpin_")
}))
"""
# The same call with the code of those modules ready before the clock starts: each Python module's source compiled
# (what finding, reading and unmarshalling its .pyc gives) and served from memory; the call still imports, that is
# executes, every module. Its time over the work alone is executing the modules; the path's time beyond it, loading
# their code (finding, reading and unmarshalling it, and the collections those allocations set off).
_CODE_FIRST = """\
import os
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
ready = {}
for name, (origin, package) in json.loads(sys.argv[1]).items():
    if origin and origin.endswith(".py"):
        with open(origin, "rb") as source:
            ready[name] = (origin, package, compile(source.read(), origin, "exec", dont_inherit=True))
class Ready(Loader, MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in ready:
            return None
        origin, package, _ = ready[name]
        spec = ModuleSpec(name, self, origin=origin, is_package=package)
        spec.has_location = True
        if package:
            spec.submodule_search_locations = [os.path.dirname(origin)]
        return spec
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        exec(ready[module.__name__][2], module.__dict__)
sys.meta_path.insert(0, Ready())
"""

# kernelpin's requests as it asks them (kernelpin.hub.wire), each before the redirects it follows.
_RECORD = """\
import json, sys
from kernelpin.hub.wire import Wire
sent = []
real = Wire.get
def get(wire, url, *args, **kwargs):
    sent.append(url)
    return real(wire, url, *args, **kwargs)
Wire.get = get
exec(sys.argv[1])
print("REQUESTS " + json.dumps(sent))
"""

# The floor of a cold load: what it must do at least, with the standard library only: read the lock (it says
# which files, and their hashes), fetch each file, hash it once, write it, import the package.
_FLOOR_COLD = """\
import sys, time
import torch
start = time.perf_counter()
import hashlib, http.client, importlib.util, json, os, tomllib, urllib.parse
spec = json.loads(sys.argv[1])
with open(spec["lock"], "rb") as lock:
    kernel = next(entry for entry in tomllib.load(lock)["kernel"] if entry["repo"] == spec["repo"])
variant = next(variant for variant in kernel["variant"] if variant["name"] == spec["variant"])
digests = {file["path"]: file["sha256"] for file in variant["files"]}
connections = {}
for url, path in spec["files"]:
    digest = digests[path]
    while True:
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in connections:
            connections[parts.netloc] = http.client.HTTPConnection(parts.netloc, timeout=10)
        connection = connections[parts.netloc]
        connection.request("GET", parts.path + ("?" + parts.query if parts.query else ""))
        response = connection.getresponse()
        body = response.read()
        if response.status in (301, 302, 303, 307, 308):
            url = urllib.parse.urljoin(url, response.getheader("Location"))
            continue
        assert response.status == 200, (response.status, url)
        break
    assert hashlib.sha256(body).hexdigest() == digest, path
    target = os.path.join(spec["directory"], path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as file:
        file.write(body)
init = os.path.join(spec["directory"], "__init__.py")
module_spec = importlib.util.spec_from_file_location("floor_kernel", init, submodule_search_locations=[spec["directory"]])
module = importlib.util.module_from_spec(module_spec)
sys.modules["floor_kernel"] = module
module_spec.loader.exec_module(module)
assert module.VARIANT == spec["variant"]
print("SECONDS", time.perf_counter() - start)
"""

# The floor of a warm online one-liner: one request (the refs, whose answer names the commit of version 1's branch),
# a hash of that commit's cached files, the import.
_FLOOR_WARM = """\
import sys, time
import torch
start = time.perf_counter()
import hashlib, http.client, importlib.util, json, os, urllib.parse
spec = json.loads(sys.argv[1])
parts = urllib.parse.urlsplit(spec["url"])
connection = http.client.HTTPConnection(parts.netloc, timeout=10)
connection.request("GET", parts.path + ("?" + parts.query if parts.query else ""))
response = connection.getresponse()
answer = response.read()
assert response.status == 200, response.status
commit = next(ref["targetCommit"] for ref in json.loads(answer)["branches"] if ref["name"] == spec["branch"])
directory = os.path.join(spec["snapshots"], commit, "build", spec["variant"])
for path, digest in spec["files"]:
    with open(os.path.join(directory, path), "rb") as file:
        assert hashlib.sha256(file.read()).hexdigest() == digest, path
init = os.path.join(directory, "__init__.py")
module_spec = importlib.util.spec_from_file_location("floor_kernel", init, submodule_search_locations=[directory])
module = importlib.util.module_from_spec(module_spec)
sys.modules["floor_kernel"] = module
module_spec.loader.exec_module(module)
assert module.VARIANT == spec["variant"]
print("SECONDS", time.perf_counter() - start)
"""


def startup_floor_source() -> str:
    """A standard-library script that builds an argparse parser printing the same help as `kernelpin --help`: the
    same description, global options, commands and epilog."""
    from kernelpin import cli

    options = []
    for action in cli._global_options(defaults=True)._actions:
        kind = "store_true" if isinstance(action, argparse._StoreTrueAction) else "store"
        settings: dict[str, Any] = {"help": action.help, "action": kind, "default": action.default}
        if kind == "store":
            settings.update(metavar=action.metavar, choices=action.choices)
        options.append((list(action.option_strings), settings))
    commands = [(spec.name, spec.help) for spec in cli.COMMANDS.values()]
    parser = cli.build_parser()
    return f"""\
import argparse
parser = argparse.ArgumentParser(prog="kernelpin", description={parser.description!r}, epilog={parser.epilog!r},
    formatter_class=argparse.RawDescriptionHelpFormatter)
group = parser.add_argument_group("global options")
for strings, settings in {options!r}:
    group.add_argument(*strings, **settings)
parser.add_argument("-V", "--version", action="version", version="", help="print kernelpin's version and exit")
commands = parser.add_subparsers(dest="command", metavar="COMMAND")
for name, text in {commands!r}:
    commands.add_parser(name, help=text)
parser.parse_args()
"""


def seconds(done: subprocess.CompletedProcess[str]) -> float:
    """What a timed run (TIMED, a floor) printed last: its seconds; its error where it failed."""
    if done.returncode != 0:
        raise SystemExit(f"a timed run failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1].split()[-1])


class HubApp:
    """An application depending on one kernel (acme/cold, released as 1.0.0 and 1.1.0, branch v1; each variant a
    LIBRARY_BYTES library beside its Python files) that a test Hub at 127.0.0.1 serves (olah behind its front, with
    the front's CDN). Each run has a home of its own: its Hub cache and kernelpin's state."""

    repo_id = "acme/cold"

    def __init__(self, work: Path) -> None:
        self.work = work
        self.server = HubServer(work / "hub", trusted_publishers=("acme",), cdn=True)
        repo = self.server.repo(self.repo_id, repo_type="kernel")
        library = {"_library.so": os.urandom(LIBRARY_BYTES)}
        publish(repo, "1.0.0", extra=library)
        publish(repo, "1.1.0", extra=library)
        repo.branch("v1")
        self.server.start()
        base = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "KERNELPIN_", "XDG_"))}
        # Telemetry left on: kernels 0.17.2 with HF_HUB_DISABLE_TELEMETRY=1 sends a user agent httpx rejects.
        base.update(
            {
                "HF_ENDPOINT": self.server.endpoint,
                "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                # The caller's PYTHONPATH after the checkout: a `kernels` put there (another release, from a `pip
                # install --target` folder) is the one every timed process runs.
                "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
                "PYTHONWARNINGS": "ignore",
            }
        )
        self.base = base
        self.project = work / "app"
        self.project.mkdir()
        (self.project / "pyproject.toml").write_text(
            f'[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n"{self.repo_id}" = 1\n'
        )

    def environ(self, home: str, offline: bool = False) -> dict[str, str]:
        root = self.work / "homes" / home
        return {
            **self.base,
            "HF_HOME": str(root / "hf"),
            "HF_HUB_CACHE": str(root / "hf" / "hub"),
            "KERNELPIN_STATE_DIR": str(root / "state"),
            "XDG_STATE_HOME": str(root / "xdg-state"),
            **({"HF_HUB_OFFLINE": "1"} if offline else {}),
        }

    def run(
        self, arguments: list[str], home: str, offline: bool = False, pythonpath: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`arguments` run in the application's directory with the home's environment (`pythonpath`: before the
        checkout on PYTHONPATH, to run another copy of kernelpin)."""
        environ = self.environ(home, offline)
        if pythonpath is not None:
            environ["PYTHONPATH"] = os.pathsep.join([pythonpath, environ["PYTHONPATH"]])
        return subprocess.run(
            arguments,
            env=environ,
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    @property
    def load_call(self) -> str:
        """kernelpin's load of the kernel as the application's lock pins it (a cold load in a fresh home)."""
        return f"import kernelpin\nkernelpin.load({self.repo_id!r}, lock={str(self.project)!r})"

    @property
    def oneliner_call(self) -> str:
        """kernelpin's one-liner for the kernel, without a lock (warm online where the home ran it before)."""
        return f"import kernelpin\nkernelpin.get_kernel({self.repo_id!r}, version=1)"

    def lock(self) -> None:
        """`kernelpin lock` in the application, as every load of it needs first."""
        locked = self.run([sys.executable, "-m", "kernelpin", "lock"], "setup")
        if locked.returncode != 0:
            raise SystemExit(f"kernelpin lock failed: {locked.stderr}")

    def timed(
        self, call: str, home: str, before: str = "", offline: bool = False, pythonpath: str | None = None
    ) -> float:
        """The seconds of `call` in a process of its own (TIMED, after `before`), run as `run` runs arguments."""
        return seconds(
            self.run([sys.executable, "-c", TIMED.format(before=before, call=call)], home, offline, pythonpath)
        )

    def fresh(self, home: str) -> None:
        """The home's Hub cache and state gone: its next run is a cold one."""
        shutil.rmtree(self.work / "homes" / home, ignore_errors=True)


def cold_paths(repeats: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kernelpin-cold-paths-"))
    app = HubApp(work)
    server, repo_id, project, run, fresh = app.server, app.repo_id, app.project, app.run, app.fresh

    python = sys.executable
    # The `kernels` the timed processes import (the record names it), and the one this process wrote the kernels.lock
    # with: the same release, or the record would name another than was timed.
    kernels_version = run([python, "-c", "import kernels; print(kernels.__version__)"], "setup").stdout.strip()
    if kernels_version != __import__("kernels").__version__:
        raise SystemExit(
            f"the timed processes import kernels {kernels_version!r}, this one {__import__('kernels').__version__}"
        )
    app.lock()
    pinned = lockfile.parse((project / "kernelpin.lock").read_text(encoding="utf-8"), "kernelpin.lock")
    kernel = pinned.kernel(repo_id)
    assert kernel is not None
    variant = kernel.variant(CPU_213)
    assert variant is not None
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    kernels_lock = project / "kernels.lock"
    kernels_lock.write_text(
        KernelLocks(
            locks={
                KernelDependency(repo_id=repo_id, version=KernelVersion.Version(1)): KernelLock(commit=kernel.commit)
            }
        ).to_json()
    )

    calls = {
        "kernelpin_load": app.load_call,
        "kernels_load": f"import kernels\nfrom pathlib import Path\n"
        f"kernels.get_locked_kernel({repo_id!r}, lockfile=Path({str(kernels_lock)!r}))",
        "kernels_load_offline": f"import kernels\nfrom pathlib import Path\n"
        f"kernels.load_kernel({repo_id!r}, lockfile=Path({str(kernels_lock)!r}))",
        "kernelpin_oneliner": app.oneliner_call,
        "kernels_oneliner": f"import kernels\nkernels.get_kernel({repo_id!r}, version=1)",
    }

    # What the floors replay (the requests kernelpin sends) and what the work-alone runs import first, each recorded
    # in a process of its own: `script` prints `prefix` and JSON last.
    def recorded(script: str, prefix: str, call: str, home: str) -> Any:
        done = run([python, "-c", script, call], home)
        if done.returncode != 0:
            raise SystemExit(f"recording failed: {done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1].removeprefix(prefix))

    def requests(call: str, home: str) -> list[str]:
        return recorded(_RECORD, "REQUESTS ", call, home)

    def modules(call: str, home: str) -> dict[str, list[Any]]:  # name -> [source file or None, is a package]
        return recorded(_RECORD_MODULES, "MODULES ", call, home)

    digests = {file.path: file.sha256 for file in variant.files}
    marker = f"/build/{CPU_213}/"
    downloads = [url for url in requests(calls["kernelpin_load"], "record-cold") if marker in url]
    cold_files = [[url, url.split(marker, 1)[1]] for url in downloads]
    requests(calls["kernelpin_oneliner"], "record-warm")  # the cold call: the warm one below asks one question
    warm_requests = requests(calls["kernelpin_oneliner"], "record-warm")
    imported = {
        "cold_load": modules(calls["kernelpin_load"], "record-modules-cold"),
        "warm_oneliner": modules(calls["kernelpin_oneliner"], "record-warm"),  # warm: the cold call ran above
    }
    cached = next(
        path.parent
        for path in (work / "homes" / "record-warm").rglob("__init__.py")
        if path.parent.name == CPU_213 and "snapshots" in path.parts
    )
    floor_startup = work / "floor_startup.py"
    floor_startup.write_text(startup_floor_source())
    scripts = Path(python).parent
    # kernels' console script, as its installer writes it, for the release the timed processes import (the venv's
    # own script would import its own release's entry point, which another release may not have).
    entry = run(
        [
            python,
            "-c",
            "import importlib.metadata as m; print(tuple(m.entry_points(group='console_scripts', name='kernels'))[0].value)",
        ],
        "setup",
    ).stdout.strip()
    module, _, function = entry.partition(":")
    kernels_script = work / "kernels"
    kernels_script.write_text(
        f"import re\nimport sys\nfrom {module} import {function}\nif __name__ == '__main__':\n"
        f"    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    sys.exit({function}())\n"
    )
    same_help = (
        run([str(scripts / "kernelpin"), "--help"], "setup").stdout
        == run([python, str(floor_startup), "--help"], "setup").stdout
    )

    timed = app.timed

    def timed_with_first(before: str, path: str, call: str, home: str) -> float:
        code = TIMED.format(before=before, call=call)
        return seconds(run([python, "-c", code, json.dumps(imported[path])], home))

    def cold_floor() -> float:
        directory = work / "floor-cold"
        shutil.rmtree(directory, ignore_errors=True)
        spec = {
            "files": cold_files,
            "directory": str(directory),
            "variant": CPU_213,
            "lock": str(project / "kernelpin.lock"),
            "repo": repo_id,
        }
        return seconds(run([python, "-c", _FLOOR_COLD, json.dumps(spec)], "floor"))

    def warm_floor() -> float:
        spec = {
            "url": warm_requests[0],
            "files": sorted(digests.items()),
            "snapshots": str(cached.parents[2]),  # snapshots/<commit>/build/<variant>
            "branch": "v1",
            "variant": CPU_213,
        }
        return seconds(run([python, "-c", _FLOOR_WARM, json.dumps(spec)], "floor"))

    def whole(arguments: list[str]) -> float:
        start = time.perf_counter()
        done = run(arguments, "startup")
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{arguments} failed: {done.stderr}")
        return elapsed

    samples: dict[str, list[float]] = defaultdict(list)

    def measure_round() -> None:
        # start-up
        samples["startup_kernelpin"].append(whole([str(scripts / "kernelpin"), "--help"]))
        samples["startup_kernels"].append(whole([python, str(kernels_script), "--help"]))
        samples["startup_floor"].append(whole([python, str(floor_startup), "--help"]))
        # cold load, then the same load warm and offline
        for tool in ("kernelpin", "kernels"):
            fresh(f"{tool}-load")
            samples[f"cold_load_{tool}"].append(timed(calls[f"{tool}_load"], f"{tool}-load"))
        samples["cold_load_floor"].append(cold_floor())
        for part, before in (("work", _IMPORTED_FIRST), ("code_ready", _CODE_FIRST)):
            fresh(f"kernelpin-load-{part}")
            samples[f"cold_load_{part}"].append(
                timed_with_first(before, "cold_load", calls["kernelpin_load"], f"kernelpin-load-{part}")
            )
        samples["warm_load_kernelpin"].append(timed(calls["kernelpin_load"], "kernelpin-load", offline=True))
        if "warm_load" not in kernels_failed:
            samples["warm_load_kernels"].append(timed(calls["kernels_load_offline"], "kernels-load", offline=True))
        # the one-liner: cold, then warm online
        for tool in ("kernelpin", "kernels"):
            fresh(f"{tool}-oneliner")
            samples[f"cold_oneliner_{tool}"].append(timed(calls[f"{tool}_oneliner"], f"{tool}-oneliner"))
            samples[f"warm_oneliner_{tool}"].append(timed(calls[f"{tool}_oneliner"], f"{tool}-oneliner"))
        samples["warm_oneliner_floor"].append(warm_floor())
        for part, before in (("work", _IMPORTED_FIRST), ("code_ready", _CODE_FIRST)):
            samples[f"warm_oneliner_{part}"].append(
                timed_with_first(before, "warm_oneliner", calls["kernelpin_oneliner"], "kernelpin-oneliner")
            )

    # A path `kernels` cannot take here is recorded with kernels' error and timed for kernelpin alone (kernels 0.17.2's
    # offline load_kernel asks huggingface_hub >= 1.10 for the whole snapshot, which get_locked_kernel did not fetch).
    fresh("probe")
    run([python, "-c", TIMED.format(before="", call=calls["kernels_load"])], "probe")
    probe = run([python, "-c", TIMED.format(before="", call=calls["kernels_load_offline"])], "probe", offline=True)
    kernels_failed = {} if probe.returncode == 0 else {"warm_load": probe.stderr.strip().splitlines()[-1][:300]}

    load_start = os.getloadavg()
    measure_round()  # warm-up: the server's caches, the OS file cache; not counted
    samples.clear()
    for _ in range(repeats):
        measure_round()
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    return summarize(
        samples,
        {
            "repeats": repeats,
            "machine": machine.description(),
            "python": sys.version.split()[0],
            "torch": __import__("importlib.metadata").metadata.version("torch"),
            "kernels_version": kernels_version,
            "kernels_failed": kernels_failed,
            "load_average": {"start": load_start, "end": os.getloadavg()},
            "library_bytes": LIBRARY_BYTES,
            "variants": len(VARIANTS),
            "floor_prints_the_same_help": same_help,
            "cold_load_requests": len(cold_files),
            "modules_imported": {
                path: {"all": len(names), "kernelpin": sum(name.split(".")[0] == "kernelpin" for name in names)}
                for path, names in imported.items()
            },
        },
    )


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(samples: dict[str, list[float]], record: dict[str, Any]) -> dict[str, Any]:
    record["samples"] = dict(sorted(samples.items()))
    record["medians_s"] = {key: statistics.median(values) for key, values in sorted(samples.items())}
    paths: dict[str, Any] = {}
    for path in ("startup", "cold_load", "warm_load", "cold_oneliner", "warm_oneliner"):
        ours, theirs = samples[f"{path}_kernelpin"], samples.get(f"{path}_kernels")
        if theirs is None:  # kernels failed this path (record["kernels_failed"])
            paths[path] = {}
            continue
        entry: dict[str, Any] = {"to_kernels": _spread([a / b for a, b in zip(ours, theirs, strict=True)])}
        if path in TARGETS:
            entry["kernels_target"] = TARGETS[path]
            entry["to_kernels_over_target"] = entry["to_kernels"]["median"] / TARGETS[path]
        if f"{path}_floor" in samples:
            floor = samples[f"{path}_floor"]
            entry["to_floor"] = _spread([a / b for a, b in zip(ours, floor, strict=True)])
            entry["floor_to_kernels"] = _spread([a / b for a, b in zip(floor, theirs, strict=True)])
            entry["to_floor_over_target"] = entry["to_floor"]["median"] / FLOOR_TARGET
        if f"{path}_work" in samples:
            work = samples[f"{path}_work"]
            entry["work_to_floor"] = _spread([a / b for a, b in zip(work, floor, strict=True)])
            entry["importing_s"] = statistics.median(a - b for a, b in zip(ours, work, strict=True))
            ready = samples[f"{path}_code_ready"]
            entry["loading_code_s"] = statistics.median(a - b for a, b in zip(ours, ready, strict=True))
            entry["executing_s"] = statistics.median(a - b for a, b in zip(ready, work, strict=True))
            # The path with no module code to load: the most that cutting the same code into fewer or smaller
            # modules could give (it still executes every module and does the same work).
            entry["code_ready_to_floor"] = _spread([a / b for a, b in zip(ready, floor, strict=True)])
        paths[path] = entry
    record["paths"] = paths
    return record


LABELS = {
    "startup": "start-up: `--help` (whole process)",
    "cold_load": "cold load (empty Hub cache), beyond `import torch`",
    "warm_load": "warm load, HF_HUB_OFFLINE=1, beyond `import torch`",
    "cold_oneliner": "one-liner `get_kernel(repo, version=1)`, cold, beyond `import torch`",
    "warm_oneliner": "one-liner, warm cache, online, beyond `import torch`",
}


def render(r: dict[str, Any]) -> str:
    def ms(key: str) -> str:
        value = r["medians_s"].get(key)
        return "-" if value is None else f"{value * 1000:.1f} ms"

    def spread(entry: dict[str, float]) -> str:
        return f"**{entry['median']:.2f}x** [{entry['min']:.2f}-{entry['max']:.2f}]"

    rows = []
    for path, entry in r["paths"].items():
        if path in r["kernels_failed"]:
            rows.append(f"| {LABELS[path]} | {ms(path + '_kernelpin')} | fails (below) | - | - | - | - |")
            continue
        target = (
            f"{entry['to_kernels_over_target']:.2f} of the limit {entry['kernels_target']}x" if path in TARGETS else ""
        )
        floor = (
            f"{ms(path + '_floor')} | {spread(entry['to_floor'])}, {entry['to_floor_over_target']:.2f} of the limit 2x"
            if "to_floor" in entry
            else "- | -"
        )
        rows.append(
            f"| {LABELS[path]} | {ms(path + '_kernelpin')} | {ms(path + '_kernels')} | {spread(entry['to_kernels'])} "
            f"| {target} | {floor} |"
        )
    table = "\n".join(rows)
    failed = "".join(
        f"\nkernels {r['kernels_version']} fails the {LABELS[path].split(',')[0]} here: `{error}`\n"
        for path, error in r["kernels_failed"].items()
    )
    work = "\n".join(
        f"- {'cold load' if path == 'cold_load' else 'warm online one-liner'}: {ms(path + '_work')}, **{entry['work_to_floor']['median']:.2f}x** "
        f"[{entry['work_to_floor']['min']:.2f}-{entry['work_to_floor']['max']:.2f}] the floor; importing "
        f"{r['modules_imported'][path]['all']} modules ({r['modules_imported'][path]['kernelpin']} of kernelpin's) "
        f"took the other {entry['importing_s'] * 1000:.1f} ms"
        + (" (less what ran while its refs request was on its way)" if path == "warm_oneliner" else "")
        + f": loading their code {entry['loading_code_s'] * 1000:.1f} ms, executing them "
        f"{entry['executing_s'] * 1000:.1f} ms. With their code ready (none to load): {ms(path + '_code_ready')}, "
        f"{spread(entry['code_ready_to_floor'])} the floor, about the most a recut of the same modules could reach"
        for path, entry in r["paths"].items()
        if "work_to_floor" in entry
    )
    return f"""# kernelpin's cold paths (issue 53)

One kernel ({r["variants"]} variants, each a {r["library_bytes"] >> 20} MiB library beside its Python files) on the test
Hub at 127.0.0.1 (olah behind its front, with the front's CDN); {r["machine"]}, torch {r["torch"]}; kernels {r["kernels_version"]}. Medians of {r["repeats"]} rounds; in each round kernelpin, kernels and
the floor run one after another, each in a fresh process, and the ratios are taken pair by pair (median
[min-max] over the rounds). Load average {r["load_average"]["start"][0]:.1f} at the start,
{r["load_average"]["end"][0]:.1f} at the end. Generated by `python -m benchmarks.kernelpin_bench --cold-paths`.

| path | kernelpin | kernels | kernelpin / kernels | over its target | floor | kernelpin / floor |
|---|---|---|---|---|---|---|
{table}
{failed}
Floors, standard library only, measured in the same rounds: start-up, an argparse script printing the same help
(the same text: {r["floor_prints_the_same_help"]}); cold load, the lock read with tomllib for the variant's files and
hashes, the {r["cold_load_requests"]} GETs kernelpin sends with http.client, each file written and hashed once, the
package imported; warm online one-liner, the one request kernelpin sends (its refs), its answer read for the commit
of version 1's branch, one sha256 over that commit's cached files, the import. "Of the limit": the median ratio over
the target (1.00 or less meets it).

kernelpin's work alone, the same call in the same rounds with every module it imports (recorded from a run of its
own) imported before the clock starts; and the same call with those modules' code ready before it starts (each
source compiled and served from memory, so the call executes every module but finds, reads and unmarshals none):
its time over the work alone is executing the modules, the path's time over it loading their code (finding,
reading and unmarshalling it, and the collections those allocations set off):
{work}
"""
