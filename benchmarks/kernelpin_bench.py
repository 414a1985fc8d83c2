"""Benchmark kernelpin against a real Hub API (olah) and the `kernels` package on the same server.

Measures: `lock` of N kernels (cold cache; parallel vs one worker) against its floor, the same HTTP
requests sent by a plain concurrent client on the same server, with the requests a lock sends counted per
kernel and per variant; a no-op `lock`, a cold and a no-op `sync`, and `kernelpin.load` over a plain import
of the same directory; then tries `kernels lock` and `kernels download` (kernels 0.17: integer majors on
v<N> branches, kernel repo type) on the same repos.

    python -m benchmarks.kernelpin_bench [--kernels 20] [--repeats 5] [--lock-only]
    python -m benchmarks.kernelpin_bench --bulk [--bulk-kernels 20] [--bulk-mb 200] [--repeats 3] [--no-record]
    python -m benchmarks.kernelpin_bench --oneliner [--repeats 5]
    python -m benchmarks.kernelpin_bench --slim [--slim-mb 4] [--slim-object OBJ] [--repeats 3] [--no-record]

Writes benchmarks/results/cpu/kernelpin.json and kernelpin.md. Times are medians; compare ratios, not absolutes.
`--bulk` writes kernelpin-bulk.json and .md instead (kernelpin-bulk-<N>mb.* for `--bulk-mb N` other than 200): sync of big kernels cold, warm and offline against
`kernels download`, a warm load against `get_locked_kernel`.
`--oneliner` measures only the lockless one-liner, `kernelpin.get_kernel(repo, version=1)` against
`kernels.get_kernel` (cold cache, warm cache online, warm offline), each in a fresh process that has imported
torch before the clock starts (both need it; the time counted is the package's import and the call), once as
torch leaves the garbage collector (with the time the call spent in full collections, `gc.callbacks`, beside it) and
once with it settled by a full collection before the clock, and writes
benchmarks/results/cpu/kernelpin-oneliner.json and .md.
`--slim` measures what a machine downloads (issue 51): a cold `kernelpin sync` on a machine whose GPU capability is
known (9.0: it takes the release's per-capability build) against one where it is not (the fat build), for a
synthetic kernel of 11 capabilities of `--slim-mb` MB each and, with `--slim-object` (a CUDA object compiled for
the 13.0 list, e.g. `python -m tools.maintainer.toolkits --toolkit 13.0 --keep DIR`), img2gray's own device code split
per capability by tools/builder/capability_builds.py; bytes downloaded and seconds, side by side with their
ratios; writes kernelpin-slim.json and .md.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock

import httpx2

from benchmarks import machine
from kernelpin import HubSource, Project
from kernelpin.cli import main as kernelpin_main
from kernelpin.loading.runtime import module_name
from kernelpin.project import read_requirements
from kernelpin.resolve import resolve
from kernelpin.store import lockfiles
from kernelpin.store.receipts import SETTLE_NS
from testkit.fake_kernel import CPU_213, VARIANTS, capability_release_files, publish
from testkit.hub import HubServer

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results" / "cpu"


def compile_kernelpin() -> None:
    """Write the bytecode of this checkout's kernelpin, as installing a wheel does (pip compiles it): the peer's
    is in site-packages, and under PYTHONDONTWRITEBYTECODE=1 each fresh process would otherwise compile every
    kernelpin module it imports again, on the clock."""
    compileall.compile_dir(REPO_ROOT / "kernelpin", quiet=1)


def median_time(run, repeats: int, before=lambda: None) -> float:
    samples = []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def quiet(args: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = kernelpin_main(args)
    if status != 0:
        raise SystemExit(f"kernelpin {' '.join(args)} failed")


def timed_subprocess(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    elapsed = time.perf_counter() - start
    tail = (done.stderr or done.stdout).strip().splitlines()
    return elapsed, done.returncode, tail[-1] if tail else ""


def recorded_requests(run: Callable[[], object]) -> list[tuple[str, str]]:
    """The HTTP requests `run` sends through httpx2 (huggingface_hub's client), as (method, url), in order.
    Counted at Client.send: one per request made, a redirect the client follows (olah redirects tree
    listings to a trailing-slash URL) is part of its request."""
    sent: list[tuple[str, str]] = []
    real = httpx2.Client.send

    def counting(client: httpx2.Client, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        sent.append((request.method, str(request.url)))
        return real(client, request, **kwargs)

    with mock.patch.object(httpx2.Client, "send", counting):
        run()
    return sent


def floor_client(per_kernel: list[list[tuple[str, str]]], workers: int) -> Callable[[], None]:
    """The same requests from a plain client: a fresh pooled httpx2.Client, `workers` threads, each kernel's
    requests in order (each needs the one before: the commit from the refs, the paths from the tree)."""

    def run() -> None:
        with httpx2.Client(follow_redirects=True) as client:

            def one_kernel(requests: list[tuple[str, str]]) -> None:
                for method, url in requests:
                    client.request(method, url).raise_for_status()

            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(one_kernel, per_kernel))

    return run


# One process of the one-liner: torch imported first, then the package's import and the call are timed. With
# "settled", a full garbage collection runs between the two: torch's import leaves the collector one full pass
# due (some 50-120 ms over torch's objects), which whatever allocates next pays; settled, each tool's own cost.
# The time the call spent in full collections (gc.callbacks) is printed beside it.
ONELINER = """\
import gc, sys, time
import torch
if sys.argv[4] == "settled":
    gc.collect()
full = []
gc.callbacks.append(lambda phase, info: info["generation"] == 2 and full.append(time.perf_counter()))
start = time.perf_counter()
if sys.argv[1] == "kernelpin":
    import kernelpin as package
else:
    import kernels as package
module = package.get_kernel(sys.argv[2], version=1)
elapsed = time.perf_counter() - start
assert module.VARIANT == sys.argv[3], module.VARIANT
print(elapsed, sum(end - begin for begin, end in zip(full[::2], full[1::2])))
"""


def oneliner(repeats: int) -> dict[str, Any]:
    """`get_kernel(repo, version=1)` of kernelpin and kernels, side by side on one server, in fresh processes."""
    work = Path(tempfile.mkdtemp(prefix="kernelpin-oneliner-"))
    server = HubServer(work / "hub", trusted_publishers=("acme",), cdn=True)
    repo_id = "acme/oneliner"
    repo = server.repo(repo_id, repo_type="kernel")
    publish(repo, "1.0.0")
    publish(repo, "1.1.0")
    repo.branch("v1")
    server.start()
    base = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "KERNELPIN_"))}
    # Telemetry left on: kernels 0.17.2 (the oldest kernelpin supports) with HF_HUB_DISABLE_TELEMETRY=1 sends a
    # user agent ending in "; ", which httpx rejects (fixed in 0.18).
    base.update(
        {
            "HF_ENDPOINT": server.endpoint,
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "PYTHONPATH": str(REPO_ROOT),
            "PYTHONWARNINGS": "ignore",
        }
    )

    def environ(tool: str, offline: bool = False) -> dict[str, str]:
        home = work / tool
        return {
            **base,
            "HF_HOME": str(home / "hf"),
            "HF_HUB_CACHE": str(home / "hf" / "hub"),
            "KERNELPIN_STATE_DIR": str(home / "state"),
            **({"HF_HUB_OFFLINE": "1"} if offline else {}),
        }

    def once(tool: str, offline: bool = False, gc_state: str = "as left") -> tuple[float, float]:
        """The call's time and the part of it spent in full garbage collections."""
        done = subprocess.run(
            [sys.executable, "-c", ONELINER, tool, repo_id, CPU_213, gc_state],
            env=environ(tool, offline),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            return float("nan"), float("nan")
        elapsed, collecting = done.stdout.strip().splitlines()[-1].split()
        return float(elapsed), float(collecting)

    def clear(tool: str) -> None:
        shutil.rmtree(work / tool, ignore_errors=True)

    samples: dict[str, list[float]] = defaultdict(list)
    load_start = os.getloadavg()
    once("kernelpin"), once("kernels")  # warm-up: the server's git caches, the OS file cache
    for _ in range(repeats):  # the tools and both GC states alternate, so all see the same machine state
        for prefix, gc_state in (("", "as left"), ("settled_", "settled")):
            for tool in ("kernelpin", "kernels"):
                clear(tool)
                for case, offline in (("cold", False), ("warm", False), ("offline", True)):
                    elapsed, collecting = once(tool, offline=offline, gc_state=gc_state)
                    samples[f"{prefix}{tool}_{case}_s"].append(elapsed)
                    if not prefix:  # the same call less its full collections: each tool's own cost
                        samples[f"collected_{tool}_{case}_s"].append(collecting)
                        samples[f"uncollected_{tool}_{case}_s"].append(elapsed - collecting)
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    results: dict[str, Any] = {
        "repeats": repeats,
        "variants": len(VARIANTS),
        "machine": machine.description(),
        "kernels_version": __import__("importlib.metadata").metadata.version("kernels"),
        "load_average": {"start": load_start, "end": os.getloadavg()},
    }
    for key, values in sorted(samples.items()):
        finite = [value for value in values if value == value]
        results[key] = statistics.median(finite) if len(finite) == len(values) else None  # None: a run failed
    return results


def render_oneliner(r: dict) -> str:
    def cell(key: str) -> str:
        return "fails" if r.get(key) is None else f"{r[key]:.3f} s"

    def ratio(ours: float | None, theirs: float | None) -> str:
        return "-" if ours is None or theirs is None else f"**{ours / theirs:.2f}x**"

    def rows(prefix: str, gc_state: str) -> str:
        return "\n".join(
            f"| {label}{gc_state} | {cell(f'{prefix}kernelpin_{case}_s')} | {cell(f'{prefix}kernels_{case}_s')} | "
            f"{ratio(r.get(f'{prefix}kernelpin_{case}_s'), r.get(f'{prefix}kernels_{case}_s'))} |"
            for label, case in (
                ("cold cache", "cold"),
                ("warm cache, online", "warm"),
                ("warm cache, HF_HUB_OFFLINE=1", "offline"),
            )
        )

    return f"""# The one-liner: `get_kernel(repo, version=1)`

One kernel with {r["variants"]} variants on the test Hub at 127.0.0.1 (olah behind its front, with the front's CDN), {r["machine"]}; kernels {r["kernels_version"]};
medians of {r["repeats"]} runs, the tools alternating. Each run is a fresh process that imports torch before the
clock starts; the time is the package's import and the call (resolve branch v1, choose the variant, download
it or find it in the cache, verify, import). Both packages' bytecode is compiled beforehand (kernelpin's as a
wheel's install does). Generated by `python -m benchmarks.kernelpin_bench --oneliner`.

| case | kernelpin.get_kernel | kernels.get_kernel | kernelpin's time / kernels' |
|---|---|---|---|
{rows("", "")}
{rows("uncollected_", ", less its full collections")}
{rows("settled_", ", torch's import settled")}

Torch's import leaves the garbage collector a full pass due over its objects, which whichever code allocates next
pays: in the first rows both tools pay it inside the timed call (a full collection took {cell("collected_kernelpin_cold_s")}
in kernelpin's cold call, {cell("collected_kernels_cold_s")} in kernels'; medians). "Less its full collections": the same
calls, the time each spent in full collections (measured with `gc.callbacks`) taken off. "Settled": other runs,
with a full collection (`gc.collect()`) after `import torch`, before the clock. Either way each tool's own cost
remains, the time beyond `import torch`.
{offline_line(r)} kernelpin uses the resolution it
remembered online (kernelpin.store.resolutions) and verifies the cached files against it.{load_line(r)}
"""


def offline_line(r: dict) -> str:
    """What the measured kernels did offline by version: 0.17.2 records no ref, 0.18 on records refs/v1 online."""
    if r.get("kernels_offline_s") is None:
        return f"Offline, kernels {r['kernels_version']} fails by version (it writes no `refs/v1` to read back);"
    return (
        f"Offline, kernels {r['kernels_version']} loads by version from the `refs/v1` it recorded online "
        "(0.18 and later);"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lock-only", action="store_true", help="lock and its floor only; print, write nothing")
    parser.add_argument("--bulk", action="store_true", help="big kernels instead: sync and warm load against kernels")
    parser.add_argument("--bulk-kernels", type=int, default=20)
    parser.add_argument("--bulk-mb", type=int, default=BULK_MB, help="the size of each big kernel's library (MB)")
    parser.add_argument("--bulk-cold-repeats", type=int, default=1)
    parser.add_argument("--no-record", action="store_true", help="--bulk: print, write nothing")
    parser.add_argument("--oneliner", action="store_true", help="only get_kernel against kernels.get_kernel")
    parser.add_argument("--slim", action="store_true", help="per-capability against fat builds: bytes and cold sync")
    parser.add_argument("--slim-mb", type=float, default=4.0, help="--slim: MB of device code per capability")
    parser.add_argument("--slim-object", type=Path, help="--slim: a CUDA object of img2gray (13.0 list) to split")
    args = parser.parse_args()
    compile_kernelpin()
    if args.bulk:
        return bulk(args)
    if args.slim:
        return slim(args)
    if args.oneliner:
        measured = oneliner(args.repeats)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "kernelpin-oneliner.json").write_text(json.dumps(measured, indent=2, sort_keys=True) + "\n")
        (RESULTS / "kernelpin-oneliner.md").write_text(render_oneliner(measured))
        print(json.dumps(measured, indent=2, sort_keys=True))
        return
    work = Path(tempfile.mkdtemp(prefix="kernelpin-bench-"))
    # acme is a trusted publisher on the test Hub (its organization overview says so), as `kernels lock` checks.
    server = HubServer(work / "hub", trusted_publishers=("acme",), cdn=True)
    repo_ids = [f"acme/bench-{i:02d}" for i in range(args.kernels)]
    for repo_id in repo_ids:
        repo = server.repo(repo_id, repo_type="kernel")
        publish(repo, "1.0.0")
        publish(repo, "1.1.0")
        repo.branch("v1")  # the kernels package's integer-major scheme
    server.start()
    cache = work / "hf-cache"
    os.environ.update(
        {
            "HF_ENDPOINT": server.endpoint,
            "HF_HUB_CACHE": str(cache),
            "HF_HOME": str(work / "hf-home"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }
    )
    project = work / "app"
    project.mkdir()
    # `= 1` is the one requirement form both tools understand: the branch v1 for both (here at v1.1.0).
    (project / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n'
        + "".join(f'"{repo_id}" = 1\n' for repo_id in repo_ids)
    )
    lock_path = project / "kernelpin.lock"
    requirements = read_requirements(Project(project))
    source = HubSource.from_env()

    def cold() -> None:
        shutil.rmtree(cache, ignore_errors=True)
        lock_path.unlink(missing_ok=True)

    results: dict[str, Any] = {
        "kernels": args.kernels,
        "variants_per_kernel": 5,
        "repeats": args.repeats,
        "machine": machine.description(),
    }

    def lock(workers: int) -> Callable[[], object]:
        return lambda: resolve(source, requirements, None, upgrade=lambda _: True, workers=workers)

    cold()
    lock(8)()  # warm-up: imports, the client's connection pool, olah's git caches
    cold()
    sent = recorded_requests(lock(8))
    per_kernel: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for method, url in sent:
        per_kernel[next(r for r in repo_ids if f"/{r}/" in url + "/")].append((method, url))
    kinds: dict[str, int] = defaultdict(int)
    for method, url in sent:
        kinds[f"{method} " + ("refs" if "/refs" in url else "tree" if "/tree/" in url else url.rsplit("/", 1)[-1])] += 1
    results["lock_requests"] = {
        "total": len(sent),
        "per_kernel": len(sent) / len(repo_ids),
        "variants_per_kernel": len(VARIANTS),
        "by_kind": dict(sorted(kinds.items())),
    }
    # Alternate lock and floor rounds so that both see the same server and machine state.
    lock_times, floor_times = [], []
    floor = floor_client([per_kernel[r] for r in repo_ids], workers=8)
    for _ in range(args.repeats):
        lock_times.append(median_time(lock(8), 1, cold))
        floor_times.append(median_time(floor, 1))
    results["lock_cold_parallel_s"] = statistics.median(lock_times)
    results["lock_floor_s"] = statistics.median(floor_times)
    if args.lock_only:
        print(json.dumps(results, indent=2))
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
        return
    results["lock_cold_one_worker_s"] = median_time(lock(1), args.repeats, cold)
    results["lock_cli_cold_s"] = median_time(lambda: quiet(["--project", str(project), "lock"]), args.repeats, cold)
    results["lock_cli_noop_s"] = median_time(lambda: quiet(["--project", str(project), "lock"]), args.repeats)
    sync_args = ["--project", str(project), "sync", "--frozen", "--torch", "2.13", "--json"]
    results["sync_cold_s"] = median_time(
        lambda: quiet(sync_args), args.repeats, lambda: shutil.rmtree(cache, ignore_errors=True)
    )
    quiet(sync_args)
    results["sync_noop_s"] = median_time(lambda: quiet(sync_args), args.repeats)

    # load vs a plain import of the same, already verified directory.
    import torch  # noqa: F401  (load needs torch; import it outside the timing)

    import kernelpin

    pinned = lockfiles.read(lock_path)
    assert pinned is not None, f"{lock_path}: locked above"
    names = [module_name(k.repo_id, k.commit, CPU_213) for k in pinned.kernels]
    directories = [
        cache / f"kernels--{k.repo_id.replace('/', '--')}" / "snapshots" / k.commit / "build" / CPU_213
        for k in pinned.kernels
    ]

    def forget() -> None:
        for name in list(sys.modules):
            if name.startswith(("_kernelpin_", "_plain_")):
                del sys.modules[name]

    def plain_imports() -> None:
        for index, directory in enumerate(directories):
            spec = importlib.util.spec_from_file_location(
                f"_plain_{index}", directory / "__init__.py", submodule_search_locations=[str(directory)]
            )
            assert spec is not None and spec.loader is not None  # a file location always has both
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)

    def loads() -> None:
        for repo_id in repo_ids:
            kernelpin.load(repo_id, lock=lock_path)

    plain = median_time(plain_imports, args.repeats, forget) / len(repo_ids)
    loaded = median_time(loads, args.repeats, forget) / len(repo_ids)
    cached = median_time(loads, args.repeats) / len(repo_ids)
    assert len(names) == len(repo_ids)
    results.update(
        {
            "plain_import_per_kernel_ms": plain * 1e3,
            "load_per_kernel_ms": loaded * 1e3,
            "load_overhead_per_kernel_ms": (loaded - plain) * 1e3,
            "load_already_loaded_per_kernel_ms": cached * 1e3,
        }
    )

    # The `kernels` package on the same server and repositories, as subprocesses (and kernelpin likewise).
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    # Telemetry left on: kernels 0.17.2 (the oldest kernelpin supports) with HF_HUB_DISABLE_TELEMETRY=1 sends a
    # user agent ending in "; ", which httpx rejects (fixed in 0.18).
    kernels_env = {key: value for key, value in env.items() if key != "HF_HUB_DISABLE_TELEMETRY"}
    kernels_cli = str(Path(sys.executable).with_name("kernels"))
    comparison: dict[str, Any] = {}
    cold()
    elapsed, status, tail = timed_subprocess([kernels_cli, "lock", str(project)], kernels_env, project)
    comparison["kernels_lock"] = {"seconds": elapsed, "exit": status, "last_line": tail}
    cold()
    elapsed, status, tail = timed_subprocess([sys.executable, "-m", "kernelpin", "lock"], env, project)
    comparison["kernelpin_lock_subprocess"] = {"seconds": elapsed, "exit": status}
    if comparison["kernels_lock"]["exit"] != 0:
        # kernels download from a kernels.lock with the commits kernelpin resolved.
        from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

        relocked = lockfiles.read(lock_path)
        assert relocked is not None, f"{lock_path}: the kernelpin lock above wrote it"
        locks = KernelLocks(
            locks={
                KernelDependency(repo_id=k.repo_id, version=KernelVersion.Version(1)): KernelLock(commit=k.commit)
                for k in relocked.kernels
            }
        )
        (project / "kernels.lock").write_text(locks.to_json())
    shutil.rmtree(cache, ignore_errors=True)
    elapsed, status, tail = timed_subprocess([kernels_cli, "download", str(project)], kernels_env, project)
    comparison["kernels_download"] = {"seconds": elapsed, "exit": status, "last_line": tail}
    shutil.rmtree(cache, ignore_errors=True)
    elapsed, status, tail = timed_subprocess(
        [sys.executable, "-m", "kernelpin", "sync", "--frozen", "--torch", "2.13"], env, project
    )
    comparison["kernelpin_sync_subprocess"] = {"seconds": elapsed, "exit": status}
    elapsed, status, tail = timed_subprocess([kernels_cli, "download", str(project)], kernels_env, project)
    comparison["kernels_download_noop"] = {"seconds": elapsed, "exit": status, "last_line": tail}
    elapsed, status, tail = timed_subprocess(
        [sys.executable, "-m", "kernelpin", "sync", "--frozen", "--torch", "2.13"], env, project
    )
    comparison["kernelpin_sync_noop_subprocess"] = {"seconds": elapsed, "exit": status}
    results["comparison"] = comparison
    import kernels as kernels_package

    results["kernels_version"] = (
        kernels_package.__version__
        if hasattr(kernels_package, "__version__")
        else __import__("importlib.metadata").metadata.version("kernels")
    )
    server.stop()
    shutil.rmtree(work, ignore_errors=True)

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "kernelpin.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    (RESULTS / "kernelpin.md").write_text(render_markdown(results))
    print(json.dumps(results, indent=2, sort_keys=True))


def render_markdown(r: dict) -> str:
    c = r["comparison"]
    q = r["lock_requests"]
    by_kind = ", ".join(f"{count} {kind}" for kind, count in q["by_kind"].items())

    def outcome(entry: dict) -> str:
        return f"{entry['seconds']:.2f} s" if entry["exit"] == 0 else f"fails: `{entry['last_line']}`"

    def ratio(theirs: dict, ours: dict) -> str:
        if theirs["exit"] != 0 or ours["exit"] != 0:
            return "-"
        return f"{theirs['seconds'] / ours['seconds']:.2f}x"

    return f"""# kernelpin benchmark

{r["kernels"]} kernels x {r["variants_per_kernel"]} variants (metadata.json with digests), the test Hub (olah behind its front, with the front's CDN) on 127.0.0.1,
{r["machine"]}; medians of {r["repeats"]} runs. Generated by `python -m benchmarks.kernelpin_bench`.

A cold lock sends {q["total"]} requests, {q["per_kernel"]:g} per kernel: its refs, its file tree and one GET of
each of its {q["variants_per_kernel"]} variants' metadata.json ({by_kind}). metadata.json is checked against the
git blob id of the tree listing and carries the sha256 of every other file of its variant, so no binary is
fetched; locking writes nothing to the Hub cache. The floor is the same requests, recorded from the lock and
replayed by a plain `httpx2.Client` (huggingface_hub's HTTP library) with 8 threads, each kernel's requests in
order (each needs the answer before it), in rounds alternating with the lock.

| operation | time | ratio |
|---|---|---|
| lock, cold cache, 8 workers | {r["lock_cold_parallel_s"]:.2f} s | **{r["lock_cold_parallel_s"] / r["lock_floor_s"]:.2f}x its floor** |
| floor: the same {q["total"]} requests from a plain httpx2 client, 8 threads | {r["lock_floor_s"]:.2f} s | 1x |
| lock, cold cache, 1 worker | {r["lock_cold_one_worker_s"]:.2f} s | {r["lock_cold_one_worker_s"] / r["lock_cold_parallel_s"]:.2f}x the time of 8 workers |
| `kernelpin lock` (CLI, in-process), cold | {r["lock_cli_cold_s"]:.2f} s | |
| `kernelpin lock`, lock already fresh | {r["lock_cli_noop_s"] * 1e3:.0f} ms | {r["lock_cli_cold_s"] / r["lock_cli_noop_s"]:.0f}x faster than cold |
| `kernelpin sync --frozen`, cold cache (CPU variant of each) | {r["sync_cold_s"]:.2f} s | |
| `kernelpin sync --frozen`, no-op (re-verifies every file) | {r["sync_noop_s"] * 1e3:.1f} ms | |
| plain import of a kernel directory | {r["plain_import_per_kernel_ms"]:.2f} ms/kernel | 1x |
| `kernelpin.load` (find lock, pick variant, verify hashes, import) | {r["load_per_kernel_ms"]:.2f} ms/kernel | {r["load_per_kernel_ms"] / r["plain_import_per_kernel_ms"]:.1f}x plain import (+{r["load_overhead_per_kernel_ms"]:.2f} ms) |
| `kernelpin.load` of an already loaded kernel | {r["load_already_loaded_per_kernel_ms"]:.3f} ms/kernel | |

## Against the `kernels` package {r["kernels_version"]} (same server, same repositories, as subprocesses)

Requirement `= 1` (branch `v1`, the only form `kernels` accepts), repositories of type `kernel`.

| operation | kernels | kernelpin | kernels' time / kernelpin's |
|---|---|---|---|
| lock | {outcome(c["kernels_lock"])} | {outcome(c["kernelpin_lock_subprocess"])} | {ratio(c["kernels_lock"], c["kernelpin_lock_subprocess"])} |
| download / sync, cold | {outcome(c["kernels_download"])} | {outcome(c["kernelpin_sync_subprocess"])} | {ratio(c["kernels_download"], c["kernelpin_sync_subprocess"])} |
| download / sync, no-op | {outcome(c["kernels_download_noop"])} | {outcome(c["kernelpin_sync_noop_subprocess"])} | {ratio(c["kernels_download_noop"], c["kernelpin_sync_noop_subprocess"])} |

Each command is one process, start-up included. The test Hub answers `kernels lock`'s trusted-publisher
check (the organization overview) for `acme`; `kernels` runs without HF_HUB_DISABLE_TELEMETRY, with which
0.17.2 sends a user agent that httpx rejects (fixed in 0.18). What each lock holds differs: `kernels.lock` pins a commit and
a hash per variant directory; `kernelpin.lock` keeps the requirement, the resolved version and ref, and the
size and sha256 of every file, and `sync` verifies each file against it (a no-op sync re-hashes them all).
"""


# --- big kernels: sync of N kernels of M MB each, and a warm load, against `kernels` ------------------------

BULK_RESULTS = "kernelpin-bulk"
BULK_MB = 200  # the size; other sizes are recorded as kernelpin-bulk-<N>mb beside it


def bulk_results_name(library_mb: int) -> str:
    return BULK_RESULTS if library_mb == BULK_MB else f"{BULK_RESULTS}-{library_mb}mb"


# Run in a fresh process around each command: its wall time inside the process, and whether torch was imported.
_TIMED = """\
import atexit, json, sys, time
started = time.perf_counter()
atexit.register(lambda: print("KERNELPIN_BENCH " + json.dumps(
    {"seconds": time.perf_counter() - started, "torch": "torch" in sys.modules}), file=sys.stderr))
"""
_KERNELPIN_CLI = (
    _TIMED
    + "import runpy\nsys.argv = ['kernelpin', *sys.argv[1:]]\nrunpy.run_module('kernelpin', run_name='__main__')\n"
)
_KERNELS_CLI = _TIMED + "from kernels.cli import main\nsys.argv = ['kernels', *sys.argv[1:]]\nsys.exit(main())\n"
# A load after `import torch` (both loaders need it): the load's own time, and the import's.
_LOAD = """\
import json, sys, time
started = time.perf_counter()
import torch
imported = time.perf_counter()
{call}
done = time.perf_counter()
print("KERNELPIN_BENCH " + json.dumps({{"seconds": done - imported, "torch_import": imported - started}}), file=sys.stderr)
"""


def timed_run(code: str, arguments: list[str], env: dict[str, str], cwd: Path, may_fail: bool = False) -> dict:
    """Run `code` in a fresh interpreter: what it reported (seconds, torch imported or not), the process's wall
    and CPU time (user and system);
    with `may_fail`, a failure is recorded as its last line."""
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", code, *arguments],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if done.returncode != 0 and may_fail:
        return {"failed": done.stderr.strip().splitlines()[-2][:300]}
    if done.returncode != 0:
        raise SystemExit(f"{arguments or code[-200:]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    report = next(line for line in reversed(done.stderr.splitlines()) if line.startswith("KERNELPIN_BENCH "))
    return {**json.loads(report.split(" ", 1)[1]), "wall": wall, "cpu": cpu}


def bulk(args: argparse.Namespace) -> None:
    """Sync of `--bulk-kernels` kernels with a `--bulk-mb` MB library each (cold, warm, offline) against
    `kernels download`, and a warm load of one of them against `kernels.get_locked_kernel`, side by side."""
    work = Path(tempfile.mkdtemp(prefix="kernelpin-bulk-"))
    server = HubServer(work / "hub", trusted_publishers=("acme",), cdn=True)
    repo_ids = [f"acme/big-{i:02d}" for i in range(args.bulk_kernels)]
    # One library for all (the server's git stores it once); each kernel is still downloaded and hashed whole.
    library = os.urandom(args.bulk_mb * 1_000_000)
    for repo_id in repo_ids:
        repo = server.repo(repo_id, repo_type="kernel")
        publish(repo, "1.0.0", variants=(CPU_213,), extra={"_big.so": library})
        repo.branch("v1")
    del library
    server.start()
    caches = {"kernels": work / "cache-kernels", "kernelpin": work / "cache-kernelpin"}
    base = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "HF_ENDPOINT": server.endpoint,
        "HF_HOME": str(work / "hf-home"),
        "XDG_STATE_HOME": str(work / "state"),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    base.pop("HF_HUB_OFFLINE", None)
    # kernels 0.17.2 with HF_HUB_DISABLE_TELEMETRY=1 sends a user agent that httpx rejects (ANCHORS §8; fixed in
    # 0.18): its processes run with telemetry left on, so every supported kernels runs here.
    envs = {
        "kernels": {**base, "HF_HUB_CACHE": str(caches["kernels"])},
        "kernelpin": {**base, "HF_HUB_CACHE": str(caches["kernelpin"]), "HF_HUB_DISABLE_TELEMETRY": "1"},
    }
    project = work / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n'
        + "".join(f'"{repo_id}" = 1\n' for repo_id in repo_ids)
    )
    (project / "kernels.lock").write_text("[]")  # kernelpin lock keeps it in step: both tools sync the same commits
    timed_run(_KERNELPIN_CLI, ["lock"], envs["kernelpin"], project)
    commands = {
        "kernels": (_KERNELS_CLI, ["download", str(project)]),
        "kernelpin": (_KERNELPIN_CLI, ["sync", "--frozen"]),
    }
    # Untimed: each tool's requests once through the test Hub's CDN (kernels sends a HEAD before each GET), which
    # then holds the release as the Hub's does.
    for tool, (code, arguments) in commands.items():
        timed_run(code, arguments, {**envs[tool], "HF_HUB_CACHE": str(work / "cache-cdn")}, project)
        shutil.rmtree(work / "cache-cdn")
    results: dict[str, Any] = {
        "kernels": args.bulk_kernels,
        "library_mb": args.bulk_mb,
        "repeats": args.repeats,
        "machine": machine.description(),
        "kernels_version": importlib.metadata.version("kernels"),
        "runs": defaultdict(list),
        "bulk_cold_repeats": args.bulk_cold_repeats,
        "load_average": {"start": os.getloadavg()},
    }
    runs = results["runs"]

    def sync(state: str, tool: str) -> None:
        code, arguments = commands[tool]
        env = {**envs[tool], **({"HF_HUB_OFFLINE": "1"} if state == "offline" else {})}
        # `kernels download` cannot work offline: it asks the Hub for every variant's listing.
        served = server.cpu_seconds_by_process()
        run = timed_run(code, arguments, env, project, may_fail=state == "offline")
        if state == "cold":  # where a cold sync's CPU goes: the client's process and each server process
            run["server_cpu"] = {
                name: used - served.get(name, 0.0) for name, used in server.cpu_seconds_by_process().items()
            }
        runs[f"sync_{state}_{tool}"].append(run)

    for _ in range(args.bulk_cold_repeats):  # alternating, each from an empty cache
        for tool in ("kernels", "kernelpin"):
            shutil.rmtree(caches[tool], ignore_errors=True)
            # Neither tool syncs its downloads: the untimed os.sync() writes back what the runs before left in
            # the page cache, so that no cold sync pays for another's writes.
            os.sync()
            sync("cold", tool)
    for state in ("warm", "offline"):
        for _ in range(args.repeats):
            for tool in ("kernels", "kernelpin"):
                sync(state, tool)
    # A warm load of one kernel: the files are in the cache, verified once (kernelpin's receipts), unchanged since.
    repo_id = repo_ids[0]
    library_file = next(caches["kernelpin"].rglob("_big.so")).resolve()
    time.sleep(max(0.0, (library_file.stat().st_ctime_ns + SETTLE_NS - time.time_ns()) / 1e9) + 0.1)
    loads = {
        "kernelpin": _LOAD.format(call=f"import kernelpin\nkernelpin.load({repo_id!r}, lock={str(project)!r})"),
        "kernels": _LOAD.format(
            call="import kernels\nfrom pathlib import Path\n"
            f"kernels.get_locked_kernel({repo_id!r}, lockfile=Path({str(project / 'kernels.lock')!r}))"
        ),
    }
    env_first = {**envs["kernelpin"], "XDG_STATE_HOME": str(work / "state-first")}
    runs["load_first_kernelpin"].append(timed_run(loads["kernelpin"], [], env_first, project))  # hashes, keeps receipts
    for _ in range(args.repeats):
        for tool in ("kernels", "kernelpin"):
            runs[f"load_warm_{tool}"].append(timed_run(loads[tool], [], envs[tool], project))
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    results["load_average"]["end"] = os.getloadavg()
    summarize_bulk(results)
    print(json.dumps(results, indent=2, sort_keys=True))
    if args.no_record:
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = bulk_results_name(args.bulk_mb)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    (RESULTS / f"{name}.md").write_text(render_bulk(results))


def summarize_bulk(results: dict) -> None:
    """Medians per operation and tool, with and without the time spent importing torch."""
    torch_import = statistics.median(
        run["torch_import"] for key in ("load_warm_kernels", "load_warm_kernelpin") for run in results["runs"][key]
    )
    medians: dict[str, dict] = {}
    for key, samples in results["runs"].items():
        if any("failed" in run for run in samples):
            medians[key] = {"failed": samples[0]["failed"]}
            continue
        seconds = statistics.median(run["seconds"] for run in samples)
        imported = any(run.get("torch") for run in samples)
        medians[key] = {
            "seconds": seconds,
            "torch": imported,
            "beyond_torch": seconds - torch_import if imported else seconds,
        }
    results["torch_import_s"] = torch_import
    results["medians"] = medians
    megabytes = results["kernels"] * results["library_mb"]
    results["cold_sync_cpu_ms_per_mb"] = {  # medians over the cold syncs: the client's process, each server's
        tool: {
            name: statistics.median(
                run[key] if key == "cpu" else run["server_cpu"][name] for run in results["runs"][f"sync_cold_{tool}"]
            )
            * 1e3
            / megabytes
            for name, key in (("client", "cpu"), ("olah-kernels", "server_cpu"), ("front", "server_cpu"))
        }
        for tool in ("kernels", "kernelpin")
    }


def render_bulk(r: dict) -> str:
    m = r["medians"]

    def row(label: str, operation: str) -> str:
        ours, theirs = m[f"{operation}_kernelpin"], m[f"{operation}_kernels"]
        if "failed" in theirs:
            return f"| {label} | fails: `{theirs['failed'][:120]}` | {ours['seconds']:.2f} s | - | - |"
        torch_note = lambda entry: " (imports torch)" if entry["torch"] else ""  # noqa: E731
        return (
            f"| {label} | {theirs['seconds']:.2f} s{torch_note(theirs)} | {ours['seconds']:.2f} s{torch_note(ours)} "
            f"| {ours['seconds'] / theirs['seconds']:.2f}x | **{ours['beyond_torch'] / theirs['beyond_torch']:.2f}x** |"
        )

    first = m["load_first_kernelpin"]["seconds"]
    cpu = r["cold_sync_cpu_ms_per_mb"]
    per_mb = "; ".join(
        f"{label} {cpu['kernelpin'][name]:.1f} / {cpu['kernels'][name]:.1f} ms"
        for label, name in (
            ("olah", "olah-kernels"),
            ("the front relaying it", "front"),
            ("the client's whole process (start-up included)", "client"),
        )
    )
    return f"""# kernelpin with big kernels

{r["kernels"]} kernels, each one variant with a {r["library_mb"]} MB library (`_big.so`, the same bytes in every
kernel) and three small files, on the test Hub at 127.0.0.1 (olah behind its front, with the front's CDN);
{r["machine"]}; `kernels` {r["kernels_version"]}.
Generated by `python -m benchmarks.kernelpin_bench --bulk --bulk-kernels {r["kernels"]} --bulk-mb {r["library_mb"]}`:
each command a fresh process, both tools alternating in one run, each with its own Hub cache; medians of
{r["repeats"]} runs ({r.get("bulk_cold_repeats", 1)} for cold syncs, each from an empty cache). `kernelpin sync --frozen`
detects the machine from the installed torch's files; `kernels download` imports torch. Both loads import torch
first ({r["torch_import_s"]:.2f} s here, not counted); "beyond torch" subtracts that import where a command
makes it.

| operation | `kernels` | kernelpin | kernelpin / kernels | beyond `import torch` |
|---|---|---|---|---|
{row(f"sync of {r['kernels']} kernels, cold cache (`kernels download`)", "sync_cold")}
{row("sync, everything present (re-verified)", "sync_warm")}
{row("sync, offline (HF_HUB_OFFLINE=1)", "sync_offline")}
{row(f"warm load of one {r['library_mb']} MB kernel (`get_locked_kernel`)", "load_warm")}

A warm `kernelpin.load` reads no byte of the unchanged library: this user's receipt (device, inode, size, mtime,
ctime -> sha256, kernelpin.store.receipts) vouches for it. The first load after a sync, without a receipt, hashes it
once, in the store ({first:.2f} s), which leaves the receipt that the check right before the package runs then
finds (the library's times had settled: a file changed in the last 2 s is hashed by both); `kernels` hashes nothing.
The test Hub answers each file at a commit from its front's copy, as the Hub's CDN does (HubServer(cdn=True):
olah answered each request once, in an untimed run of each tool before the timed ones; olah alone reads each file
whole out of git and sends it in 4 KiB pieces, some 40 ms of CPU per MB, which bounded both tools before). CPU per
MB synced, kernelpin's cold sync / `kernels download`: {per_mb}. kernelpin hashes each byte on the way in and writes it
once, reading up to 1 MiB from the connection at a time; neither tool syncs a download to disk (fsync): kernelpin
does so for a file only before it keeps a hash receipt for it, in the first load (a crash can leave a downloaded
file whose bytes never reached the disk, which a hash finds and a receipt must not vouch for), and each cold sync
starts after an untimed `sync` of the machine, so that none pays for the writes of the runs before it;
it downloads up to 8 files at once, `kernels` one after another (a HEAD, then the GET): on the machine's {cpus(r)}
(shared with the test Hub) most of kernelpin's lead is the second core it keeps busy, not less CPU per MB.{load_line(r)}
"""


def cpus(r: dict) -> str:
    """How many CPUs the recorded machine has, as its description says ("2 CPUs")."""
    return next((part for part in r["machine"].split(", ") if part.endswith("CPUs")), "CPUs")


def load_line(r: dict) -> str:
    """The machine's load during a run (others' work shares its cores), as recorded."""
    load = r.get("load_average")
    if load is None:
        return ""
    show = lambda values: ", ".join(f"{value:.2f}" for value in values)  # noqa: E731
    return f"\nLoad average (1, 5, 15 min) at the start of the run: {show(load['start'])}; at its end: {show(load['end'])}."


SLIM_ARCHS = ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1+PTX")  # kernel-builder's
SLIM_GPU = "9.0"  # the machine measured: an H100/H200


def _object_release(version: str, variant: str, cuda_object: Path) -> dict[str, bytes]:
    """A release tree whose device code is a real CUDA object's (every capability in the fat build, one in each
    per-capability build, split as tools/builder/capability_builds.py splits it)."""
    from tools.builder import capability_builds

    with tempfile.TemporaryDirectory(prefix="slim-split-") as scratch:
        codes = {
            arch: capability_builds.split_object(cuda_object, arch, Path(scratch) / f"{arch}.o").read_bytes()
            for arch in SLIM_ARCHS
        }
    tree = capability_release_files(version, variant, SLIM_ARCHS, device_size=1)
    return _with_device_code(tree, variant, codes, cuda_object.read_bytes())


def _with_device_code(tree: dict[str, bytes], variant: str, codes: dict[str, bytes], fat: bytes) -> dict[str, bytes]:
    """`tree` (capability_release_files) with each build's `_device.bin` replaced and every digest recomputed."""
    from kernelpin.format import capabilities
    from kernelpin.format import metadata as kernel_metadata

    def rehash(prefix: str, device: bytes) -> dict[str, Any]:
        tree[prefix + "_device.bin"] = device
        document = json.loads(tree[prefix + "metadata.json"])
        files = {
            p[len(prefix) :]: d for p, d in tree.items() if p.startswith(prefix) and not p.endswith("metadata.json")
        }
        document["digest"]["files"] = {
            p: kernel_metadata.sha256_base64(hashlib.sha256(d).hexdigest()) for p, d in sorted(files.items())
        }
        return document

    listing: dict[str, dict[str, object]] = {}
    for arch, device in codes.items():
        name = capabilities.build_name(arch)
        prefix = f"capabilities/{variant}/{name}/"
        tree[prefix + "metadata.json"] = kernel_metadata.render(rehash(prefix, device)).encode()
        listing[name] = {
            "archs": [arch],
            "files": {
                p[len(prefix) :]: kernel_metadata.sha256_base64(hashlib.sha256(d).hexdigest())
                for p, d in sorted(tree.items())
                if p.startswith(prefix)
            },
        }
    prefix = f"build/{variant}/"
    document = rehash(prefix, fat)
    document[capabilities.KEY] = listing
    tree[prefix + "metadata.json"] = kernel_metadata.render(document).encode()
    return tree


def slim(args: argparse.Namespace) -> None:
    """Cold sync, per-capability build against fat build, on the releases the module docstring names."""
    variant = "torch213-cxx11-cu130-x86_64-linux"
    work = Path(tempfile.mkdtemp(prefix="kernelpin-slim-"))
    server = HubServer(work / "hub", trusted_publishers=("acme",), cdn=True)
    size = int(args.slim_mb * 1_000_000)
    releases = {"synthetic": capability_release_files("1.0.0", variant, SLIM_ARCHS, device_size=size)}
    if args.slim_object:
        releases["img2gray"] = _object_release("1.0.0", variant, args.slim_object)
    for name, tree in releases.items():
        repo = server.repo(f"acme/slim-{name}", repo_type="kernel")
        repo.write(tree, clear=True)
        repo.commit("release 1.0.0")
        repo.tag("v1.0.0")
        repo.branch("v1")
    server.start()
    base = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "HF_ENDPOINT": server.endpoint,
        "HF_HOME": str(work / "hf-home"),
        "XDG_STATE_HOME": str(work / "state"),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "KERNELPIN_TORCH": "2.13",
        "KERNELPIN_CUDA": "13.0",
    }
    base.pop("HF_HUB_OFFLINE", None)
    releases_measured: dict[str, object] = {}
    results: dict[str, object] = {
        "archs": list(SLIM_ARCHS),
        "gpu_capability": SLIM_GPU,
        "synthetic_mb_per_capability": args.slim_mb,
        "repeats": args.repeats,
        "machine": machine.description(),
        "releases": releases_measured,
        "load_average": os.getloadavg()[0],
    }
    for name in releases:
        project = work / f"app-{name}"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            f'[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n"acme/slim-{name}" = 1\n'
        )
        timed_run(_KERNELPIN_CLI, ["lock"], base, project)
        machines = {"fat": {}, "slim": {"KERNELPIN_GPU_CAPABILITY": SLIM_GPU}}
        runs: dict[str, list] = defaultdict(list)
        cache = work / f"cache-{name}"
        for _ in range(args.repeats):  # alternating, each from an empty cache
            for kind, extra in machines.items():
                shutil.rmtree(cache, ignore_errors=True)
                os.sync()
                run = timed_run(
                    _KERNELPIN_CLI, ["sync", "--frozen"], {**base, **extra, "HF_HUB_CACHE": str(cache)}, project
                )
                run["bytes"] = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file() and not p.is_symlink())
                runs[kind].append(run)
        row = {
            kind: {
                "bytes": statistics.median(r["bytes"] for r in runs[kind]),
                "seconds": statistics.median(r["wall"] for r in runs[kind]),
            }
            for kind in machines
        }
        row["bytes_ratio"] = row["slim"]["bytes"] / row["fat"]["bytes"]
        row["seconds_ratio"] = row["slim"]["seconds"] / row["fat"]["seconds"]
        releases_measured[name] = {**row, "runs": runs}
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    print(render_slim(results))
    if args.no_record:
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "kernelpin-slim.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    (RESULTS / "kernelpin-slim.md").write_text(render_slim(results))


def render_slim(r: dict) -> str:
    lines = [
        f"# kernelpin: per-capability builds against the fat build (cold `sync`, GPU capability {r['gpu_capability']})",
        "",
        (
            f"{r['machine']}; {r['repeats']} cold syncs each, alternating, medians. The CUDA variant has "
            f"{len(r['archs'])} capabilities ({';'.join(r['archs'])}); fat: a machine whose GPU is not known "
            "downloads the whole variant; slim: one of capability 9.0 downloads its build (and the fat build's "
            "metadata.json, which lists it). synthetic: 11 capabilities of "
            f"{r['synthetic_mb_per_capability']:g} MB each; img2gray: its device code (the CUDA object compiled for the "
            "13.0 list, `--slim-object`, split by tools/builder/capability_builds.py) as each build's payload, without "
            "the library's host code, which every build has alike."
            + (f" Load average {r['load_average']:.1f} during the run." if "load_average" in r else "")
        ),
        "",
        "| release | fat: bytes | slim: bytes | slim/fat bytes | fat: s | slim: s | slim/fat time |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in r["releases"].items():
        lines.append(
            f"| {name} | {row['fat']['bytes']:,.0f} | {row['slim']['bytes']:,.0f} | {row['bytes_ratio']:.3f} | "
            f"{row['fat']['seconds']:.2f} | {row['slim']['seconds']:.2f} | {row['seconds_ratio']:.2f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
