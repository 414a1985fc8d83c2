"""Benchmark kernelpin against a real Hub API (olah) and the `kernels` package on the same server.

Measures: `lock` of N kernels (cold cache; parallel vs one worker) against its floor, the same HTTP
requests sent by a plain concurrent client on the same server, with the requests a lock sends counted per
kernel and per variant; a no-op `lock`, a cold and a no-op `sync`, and `kernelpin.load` over a plain import
of the same directory; then tries `kernels lock` and `kernels download` (kernels 0.17: integer majors on
v<N> branches, kernel repo type) on the same repos.

    python -m benchmarks.kernelpin_bench [--kernels 20] [--repeats 5] [--lock-only]
    python -m benchmarks.kernelpin_bench --oneliner [--repeats 5]

Writes benchmarks/results/cpu/kernelpin.json and kernelpin.md. Times are medians; compare ratios, not absolutes.
`--oneliner` measures only the lockless one-liner, `kernelpin.get_kernel(repo, version=1)` against
`kernels.get_kernel` (cold cache, warm cache online, warm offline), each in a fresh process that has imported
torch before the clock starts (both need it; the time counted is the package's import and the call), and
writes benchmarks/results/cpu/kernelpin-oneliner.json and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import platform
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

import httpx2

from kernelpin import lockfile
from kernelpin.cli import main as kernelpin_main
from kernelpin.project import Project, read_requirements
from kernelpin.resolve import resolve
from kernelpin.runtime import module_name
from kernelpin.source import HubSettings, HubSource
from testkit.fake_kernel import CPU_213, VARIANTS, publish
from testkit.hub import HubServer

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results" / "cpu"


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
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - start
    tail = (done.stderr or done.stdout).strip().splitlines()
    return elapsed, done.returncode, tail[-1] if tail else ""


def recorded_requests(run: Callable[[], object]) -> list[tuple[str, str]]:
    """The HTTP requests `run` sends through httpx2 (huggingface_hub's client), as (method, url), in order.
    Counted at Client.send: one per request made, a redirect the client follows (olah redirects tree
    listings to a trailing-slash URL) is part of its request."""
    sent: list[tuple[str, str]] = []
    real = httpx2.Client.send

    def counting(client: httpx2.Client, request: httpx2.Request, **kwargs: object) -> httpx2.Response:
        sent.append((request.method, str(request.url)))
        return real(client, request, **kwargs)

    httpx2.Client.send = counting
    try:
        run()
    finally:
        httpx2.Client.send = real
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


# One process of the one-liner: torch imported first, then the package's import and the call are timed.
ONELINER = """\
import sys, time
import torch
start = time.perf_counter()
if sys.argv[1] == "kernelpin":
    import kernelpin as package
else:
    import kernels as package
module = package.get_kernel(sys.argv[2], version=1)
elapsed = time.perf_counter() - start
assert module.VARIANT == sys.argv[3], module.VARIANT
print(elapsed)
"""


def oneliner(repeats: int) -> dict[str, object]:
    """`get_kernel(repo, version=1)` of kernelpin and kernels, side by side on one server, in fresh processes."""
    work = Path(tempfile.mkdtemp(prefix="kernelpin-oneliner-"))
    server = HubServer(work / "hub", trusted_publishers=("acme",))
    repo_id = "acme/oneliner"
    repo = server.repo(repo_id, repo_type="kernel")
    publish(repo, "1.0.0")
    publish(repo, "1.1.0")
    repo.branch("v1")
    server.start()
    base = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "KERNELPIN_"))}
    # kernels 0.17.2 with HF_HUB_DISABLE_TELEMETRY=1 sends a user agent ending in "; ", which httpx rejects.
    base.update({"HF_ENDPOINT": server.endpoint, "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                 "PYTHONPATH": str(REPO_ROOT), "PYTHONWARNINGS": "ignore"})

    def environ(tool: str, offline: bool = False) -> dict[str, str]:
        home = work / tool
        return {**base, "HF_HOME": str(home / "hf"), "HF_HUB_CACHE": str(home / "hf" / "hub"),
                "KERNELPIN_STATE_DIR": str(home / "state"), **({"HF_HUB_OFFLINE": "1"} if offline else {})}

    def once(tool: str, offline: bool = False) -> float:
        done = subprocess.run([sys.executable, "-c", ONELINER, tool, repo_id, CPU_213], env=environ(tool, offline),
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            return float("nan")
        return float(done.stdout.strip().splitlines()[-1])

    def clear(tool: str) -> None:
        shutil.rmtree(work / tool, ignore_errors=True)

    samples: dict[str, list[float]] = defaultdict(list)
    once("kernelpin"), once("kernels")  # warm-up: the server's git caches, the OS file cache
    for _ in range(repeats):  # the tools alternate, so both see the same machine state
        for tool in ("kernelpin", "kernels"):
            clear(tool)
            samples[f"{tool}_cold_s"].append(once(tool))
            samples[f"{tool}_warm_s"].append(once(tool))
            samples[f"{tool}_offline_s"].append(once(tool, offline=True))
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    results: dict[str, object] = {
        "repeats": repeats, "variants": len(VARIANTS),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "kernels_version": __import__("importlib.metadata").metadata.version("kernels"),
    }
    for key, values in sorted(samples.items()):
        finite = [value for value in values if value == value]
        results[key] = statistics.median(finite) if len(finite) == len(values) else None  # None: a run failed
    return results


def render_oneliner(r: dict) -> str:
    def cell(key: str) -> str:
        return "fails" if r[key] is None else f"{r[key]:.3f} s"

    def ratio(case: str) -> str:
        ours, theirs = r[f"kernelpin_{case}_s"], r[f"kernels_{case}_s"]
        return "-" if ours is None or theirs is None else f"**{ours / theirs:.2f}x**"

    rows = "\n".join(f"| {label} | {cell(f'kernelpin_{case}_s')} | {cell(f'kernels_{case}_s')} | {ratio(case)} |"
                      for label, case in (("cold cache", "cold"), ("warm cache, online", "warm"),
                                          ("warm cache, HF_HUB_OFFLINE=1", "offline")))
    return f"""# The one-liner: `get_kernel(repo, version=1)`

One kernel with {r['variants']} variants on olah (127.0.0.1), {r['machine']}; kernels {r['kernels_version']};
medians of {r['repeats']} runs, the tools alternating. Each run is a fresh process that imports torch before the
clock starts; the time is the package's import and the call (resolve branch v1, choose the variant, download
it or find it in the cache, verify, import). Generated by `python -m benchmarks.kernelpin_bench --oneliner`.

| case | kernelpin.get_kernel | kernels.get_kernel | kernelpin's time / kernels' |
|---|---|---|---|
{rows}

Offline, kernels 0.17.2 fails by version (it writes no `refs/v1` to read back); kernelpin uses the resolution it
remembered online (kernelpin.resolutions) and verifies the cached files against it.
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lock-only", action="store_true", help="lock and its floor only; print, write nothing")
    parser.add_argument("--oneliner", action="store_true", help="only get_kernel against kernels.get_kernel")
    args = parser.parse_args()
    if args.oneliner:
        results = oneliner(args.repeats)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "kernelpin-oneliner.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
        (RESULTS / "kernelpin-oneliner.md").write_text(render_oneliner(results))
        print(json.dumps(results, indent=2, sort_keys=True))
        return
    work = Path(tempfile.mkdtemp(prefix="kernelpin-bench-"))
    # acme is a trusted publisher on the test Hub (its organization overview says so), as `kernels lock` checks.
    server = HubServer(work / "hub", trusted_publishers=("acme",))
    repo_ids = [f"acme/bench-{i:02d}" for i in range(args.kernels)]
    for repo_id in repo_ids:
        repo = server.repo(repo_id, repo_type="kernel")
        publish(repo, "1.0.0")
        publish(repo, "1.1.0")
        repo.branch("v1")  # the kernels package's integer-major scheme
    server.start()
    cache = work / "hf-cache"
    os.environ.update({"HF_ENDPOINT": server.endpoint, "HF_HUB_CACHE": str(cache), "HF_HOME": str(work / "hf-home"),
                       "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"})
    project = work / "app"
    project.mkdir()
    # `= 1` is the one requirement form both tools understand: the branch v1 for both (here at v1.1.0).
    (project / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n'
        + "".join(f'"{repo_id}" = 1\n' for repo_id in repo_ids)
    )
    lock_path = project / "kernelpin.lock"
    requirements = read_requirements(Project(project))
    source = HubSource(HubSettings.from_env())

    def cold() -> None:
        shutil.rmtree(cache, ignore_errors=True)
        lock_path.unlink(missing_ok=True)

    results: dict[str, object] = {
        "kernels": args.kernels, "variants_per_kernel": 5, "repeats": args.repeats,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
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
    results["lock_requests"] = {"total": len(sent), "per_kernel": len(sent) / len(repo_ids),
                                "variants_per_kernel": len(VARIANTS), "by_kind": dict(sorted(kinds.items()))}
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
        lambda: quiet(sync_args), args.repeats, lambda: shutil.rmtree(cache, ignore_errors=True))
    quiet(sync_args)
    results["sync_noop_s"] = median_time(lambda: quiet(sync_args), args.repeats)

    # load vs a plain import of the same, already verified directory.
    import torch  # noqa: F401  (load needs torch; import it outside the timing)

    import kernelpin

    pinned = lockfile.read(lock_path)
    names = [module_name(k.repo_id, k.commit, CPU_213) for k in pinned.kernels]
    directories = [cache / f"kernels--{k.repo_id.replace('/', '--')}" / "snapshots" / k.commit / "build" / CPU_213
                   for k in pinned.kernels]

    def forget() -> None:
        for name in list(sys.modules):
            if name.startswith(("_kernelpin_", "_plain_")):
                del sys.modules[name]

    def plain_imports() -> None:
        for index, directory in enumerate(directories):
            spec = importlib.util.spec_from_file_location(
                f"_plain_{index}", directory / "__init__.py", submodule_search_locations=[str(directory)])
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
    results.update({"plain_import_per_kernel_ms": plain * 1e3, "load_per_kernel_ms": loaded * 1e3,
                    "load_overhead_per_kernel_ms": (loaded - plain) * 1e3,
                    "load_already_loaded_per_kernel_ms": cached * 1e3})

    # The `kernels` package on the same server and repositories, as subprocesses (and kernelpin likewise).
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    # kernels 0.17.2 with HF_HUB_DISABLE_TELEMETRY=1 sends a user agent ending in "; ", which httpx rejects.
    kernels_env = {key: value for key, value in env.items() if key != "HF_HUB_DISABLE_TELEMETRY"}
    kernels_cli = str(Path(sys.executable).with_name("kernels"))
    comparison: dict[str, object] = {}
    cold()
    elapsed, status, tail = timed_subprocess([kernels_cli, "lock", str(project)], kernels_env, project)
    comparison["kernels_lock"] = {"seconds": elapsed, "exit": status, "last_line": tail}
    cold()
    elapsed, status, tail = timed_subprocess([sys.executable, "-m", "kernelpin", "lock"], env, project)
    comparison["kernelpin_lock_subprocess"] = {"seconds": elapsed, "exit": status}
    if comparison["kernels_lock"]["exit"] != 0:
        # kernels download from a kernels.lock with the commits kernelpin resolved.
        from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

        locks = KernelLocks(locks={KernelDependency(repo_id=k.repo_id, version=KernelVersion.Version(1)):
                                   KernelLock(commit=k.commit) for k in lockfile.read(lock_path).kernels})
        (project / "kernels.lock").write_text(locks.to_json())
    shutil.rmtree(cache, ignore_errors=True)
    elapsed, status, tail = timed_subprocess([kernels_cli, "download", str(project)], kernels_env, project)
    comparison["kernels_download"] = {"seconds": elapsed, "exit": status, "last_line": tail}
    shutil.rmtree(cache, ignore_errors=True)
    elapsed, status, tail = timed_subprocess(
        [sys.executable, "-m", "kernelpin", "sync", "--frozen", "--torch", "2.13"], env, project)
    comparison["kernelpin_sync_subprocess"] = {"seconds": elapsed, "exit": status}
    elapsed, status, tail = timed_subprocess([kernels_cli, "download", str(project)], kernels_env, project)
    comparison["kernels_download_noop"] = {"seconds": elapsed, "exit": status, "last_line": tail}
    elapsed, status, tail = timed_subprocess(
        [sys.executable, "-m", "kernelpin", "sync", "--frozen", "--torch", "2.13"], env, project)
    comparison["kernelpin_sync_noop_subprocess"] = {"seconds": elapsed, "exit": status}
    results["comparison"] = comparison
    import kernels as kernels_package

    results["kernels_version"] = kernels_package.__version__ if hasattr(kernels_package, "__version__") else \
        __import__("importlib.metadata").metadata.version("kernels")
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

{r['kernels']} kernels x {r['variants_per_kernel']} variants (metadata.json with digests), olah on 127.0.0.1,
{r['machine']}; medians of {r['repeats']} runs. Generated by `python -m benchmarks.kernelpin_bench`.

A cold lock sends {q['total']} requests, {q['per_kernel']:g} per kernel: its refs, its file tree and one GET of
each of its {q['variants_per_kernel']} variants' metadata.json ({by_kind}). metadata.json is checked against the
git blob id of the tree listing and carries the sha256 of every other file of its variant, so no binary is
fetched; locking writes nothing to the Hub cache. The floor is the same requests, recorded from the lock and
replayed by a plain `httpx2.Client` (huggingface_hub's HTTP library) with 8 threads, each kernel's requests in
order (each needs the answer before it), in rounds alternating with the lock.

| operation | time | ratio |
|---|---|---|
| lock, cold cache, 8 workers | {r['lock_cold_parallel_s']:.2f} s | **{r['lock_cold_parallel_s'] / r['lock_floor_s']:.2f}x its floor** |
| floor: the same {q['total']} requests from a plain httpx2 client, 8 threads | {r['lock_floor_s']:.2f} s | 1x |
| lock, cold cache, 1 worker | {r['lock_cold_one_worker_s']:.2f} s | {r['lock_cold_one_worker_s'] / r['lock_cold_parallel_s']:.2f}x the time of 8 workers |
| `kernelpin lock` (CLI, in-process), cold | {r['lock_cli_cold_s']:.2f} s | |
| `kernelpin lock`, lock already fresh | {r['lock_cli_noop_s'] * 1e3:.0f} ms | {r['lock_cli_cold_s'] / r['lock_cli_noop_s']:.0f}x faster than cold |
| `kernelpin sync --frozen`, cold cache (CPU variant of each) | {r['sync_cold_s']:.2f} s | |
| `kernelpin sync --frozen`, no-op (re-verifies every file) | {r['sync_noop_s'] * 1e3:.1f} ms | |
| plain import of a kernel directory | {r['plain_import_per_kernel_ms']:.2f} ms/kernel | 1x |
| `kernelpin.load` (find lock, pick variant, verify hashes, import) | {r['load_per_kernel_ms']:.2f} ms/kernel | {r['load_per_kernel_ms'] / r['plain_import_per_kernel_ms']:.1f}x plain import (+{r['load_overhead_per_kernel_ms']:.2f} ms) |
| `kernelpin.load` of an already loaded kernel | {r['load_already_loaded_per_kernel_ms']:.3f} ms/kernel | |

## Against the `kernels` package {r['kernels_version']} (same server, same repositories, as subprocesses)

Requirement `= 1` (branch `v1`, the only form `kernels` accepts), repositories of type `kernel`.

| operation | kernels | kernelpin | kernels' time / kernelpin's |
|---|---|---|---|
| lock | {outcome(c['kernels_lock'])} | {outcome(c['kernelpin_lock_subprocess'])} | {ratio(c['kernels_lock'], c['kernelpin_lock_subprocess'])} |
| download / sync, cold | {outcome(c['kernels_download'])} | {outcome(c['kernelpin_sync_subprocess'])} | {ratio(c['kernels_download'], c['kernelpin_sync_subprocess'])} |
| download / sync, no-op | {outcome(c['kernels_download_noop'])} | {outcome(c['kernelpin_sync_noop_subprocess'])} | {ratio(c['kernels_download_noop'], c['kernelpin_sync_noop_subprocess'])} |

Each command is one process, start-up included. The test Hub answers `kernels lock`'s trusted-publisher
check (the organization overview) for `acme`; `kernels` runs without HF_HUB_DISABLE_TELEMETRY, with which
0.17.2 sends a user agent that httpx rejects. What each lock holds differs: `kernels.lock` pins a commit and
a hash per variant directory; `kernelpin.lock` keeps the requirement, the resolved version and ref, and the
size and sha256 of every file, and `sync` verifies each file against it (a no-op sync re-hashes them all).
"""


if __name__ == "__main__":
    main()
