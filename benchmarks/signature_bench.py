"""What verifying signatures costs: `lock` of N signed kernels with verification vs without, and `load()` of
signed kernels vs unsigned ones, on the test Hub (olah behind its front, with the front's CDN for files at a
commit: HubServer(cdn=True)) with the test kit's Sigstore instance.

    python -m benchmarks.signature_bench [--kernels 20] [--repeats 5]

The signed set is acme/signed-NN, whose signers the policy names (so lock expects signatures and starts its
signature worker before the first listing); the unsigned set, the baseline "without", is plain/unsigned-NN, a
trusted publisher the policy names no signers for (nothing to verify, no worker). Rows:
- lock, in-process (a new HubSource, no lock, no signature receipts, no signature worker): 100 bundles (5
  variants each), every one verified by sigstore-python against the publisher policy, vs the unsigned set;
  sigstore already imported; rounds alternate;
- the same as commands in fresh processes (`python -m kernelpin lock`, no lock file), a relock: one unrecorded
  run of each first, so both sets start with the same warm Hub cache (the metadata.json and bundle blobs an
  earlier lock kept), warm test-Hub repositories and this user's signature receipts of every bundle
  (kernelpin.trust.receipts), so no bundle is verified again: no sigstore import, no signature worker, the
  recorded signers put to the policy;
- `lock_command_unexpected`: unsigned releases of a publisher whose signers the policy names (acme/unsigned-NN):
  the worker started for nothing, killed at the end;
- the same commands with the signature receipts removed before each run (`lock_command_no_receipts`): what a
  first verification of the same bytes costs (start-up, sigstore's import in the signature worker, 100
  verifications);
- those with KERNELPIN_SIGNATURE_WORKER=0 (`lock_command_no_worker`, receipts removed too): the verifications in
  the command's own process instead of the signature worker beside it;
- a true first lock, as a command with an empty Hub cache and no receipts each run: every metadata.json and
  bundle downloaded and verified, so a signed release costs 5 requests more per kernel (100 in all) than an
  unsigned one besides the verification;
- the same first lock with every answer of the test Hub 50 ms late (its front sleeps in each request's thread,
  so requests sent at once overlap, as over a real network): what the extra requests cost where latency, not
  the test Hub's CPU, bounds them (lock reads a kernel's small files at once, KERNELPIN_READS (32) at once for
  all kernels; repeated with 8, the bound they shared with the downloads before), and repeated with receipts of
  other bytes kept (`lock_first_50ms_other_receipts`: a user who verified before locks new releases);
- load(): 20 signed vs 20 unsigned kernels, already synced, each round in a fresh import state (load checks the
  lock's recorded signer against the policy: no cryptography; the bundle is one more locked file to re-hash).
Every variant is shaped like img2gray's CPU build (the files and sizes of `build/dev`, a 372 KB library).

Each command row also records the medians of the command's CPU time (its signature worker's included; `own`:
its own process's alone), the test Hub's CPU time and the requests it answered: on this 2-core machine the test
Hub shares the cores with the command, so a row can be bound by the machine's CPU as a whole (the command, its
worker and the Hub) rather than by kernelpin's waits.

Prints the medians and ratios as JSON and writes benchmarks/results/cpu/signatures.json, with the load average
before and after. Compare ratios, not absolute times: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
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
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks import machine
from benchmarks.kernelpin_bench import compile_kernelpin, median_time
from kernelpin import HubSource, Project
from kernelpin.cli import main as kernelpin_main
from kernelpin.files.private_state import PrivateFiles, private_directory
from kernelpin.project import read_policy, read_requirements
from kernelpin.resolve import resolve
from kernelpin.trust.checker import ReleaseChecker
from testkit.fake_kernel import kernel_files
from testkit.hub import HubServer
from testkit.sigstore_root import Identity, SigstoreRoot

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results" / "cpu"  # the machine the test Hub runs on: one set per machine
LATENCY = 0.05  # seconds per answer of the test Hub in the first-lock row "over a network"
SIGNER = Identity(repository="acme/kernels", workflow=".github/workflows/release.yaml", ref="refs/tags/v1.0.0")
# Each variant shaped like img2gray's CPU build (build/dev): its files' count and sizes, the library included
# (hashed at load like any listed file; the fake kernel never opens it).
SHAPE = {
    "_img2gray_bench.abi3.so": 371_632,
    "functional.py": 7_733,
    "stable_abi.py": 6_328,
    "_ops.py": 589,
    "img2gray/__init__.py": 120,
}


class Costs(NamedTuple):
    """What one `kernelpin lock` command cost: wall seconds, CPU seconds of the command (its signature worker's
    included), of the command's own process alone, and of the test Hub's (which shares the machine's cores), and
    requests the test Hub answered."""

    wall: float
    client_cpu: float
    own_cpu: float
    hub_cpu: float
    requests: int


# `python -m kernelpin lock`, telling at exit the CPU time of its own process (without its signature worker's).
LOCK = (
    "import atexit, resource, runpy, sys\n"
    "def own_cpu():\n"
    "    usage = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    print('OWN CPU', usage.ru_utime + usage.ru_stime, file=sys.stderr)\n"
    "atexit.register(own_cpu)\n"
    "sys.argv = ['kernelpin', 'lock']\n"
    "runpy.run_module('kernelpin', run_name='__main__', alter_sys=True)\n"
)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def answered(server: HubServer) -> int:
    """Requests the test Hub's front has answered (its log has a line for each)."""
    log = server.root / "front.log"
    return log.read_text().count("\n") if log.exists() else 0


def project(root: Path, repo_ids: list[str], trusted_root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n'
        + "".join(f'"{repo_id}" = "^1"\n' for repo_id in repo_ids)
        + f'\n[tool.kernelpin.trust]\ntrusted-root = "{trusted_root}"\n'
        + '[tool.kernelpin.trust.publishers.acme]\nsigners = [{ repository = "acme/kernels" }]\n'
        + "[tool.kernelpin.trust.publishers.plain]\n"
    )  # trusted, no signers named: no signature expected
    return root


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    compile_kernelpin()  # as a wheel's install does: the commands and the signature worker start from bytecode
    work = Path(tempfile.mkdtemp(prefix="kernelpin-signature-bench-"))
    sigstore = SigstoreRoot()
    trusted_root = sigstore.write_trusted_root(work / "trusted_root.json")
    server = HubServer(work / "hub", trusted_publishers=("acme", "plain"), cdn=True)
    signed_ids = [f"acme/signed-{i:02d}" for i in range(args.kernels)]
    unsigned_ids = [f"plain/unsigned-{i:02d}" for i in range(args.kernels)]
    # Unsigned releases of a publisher whose policy entry names its signers: lock starts the signature worker
    # before their listings (kernelpin.resolve._signature_expected), which then has nothing to verify.
    unexpected_ids = [f"acme/unsigned-{i:02d}" for i in range(args.kernels)]
    for repo_id in signed_ids + unsigned_ids + unexpected_ids:
        repo = server.repo(repo_id, repo_type="kernel")
        files = kernel_files(
            "1.0.0",
            extra={path: os.urandom(size) if path.endswith(".so") else b"#" * size for path, size in SHAPE.items()},
        )
        repo.write(sigstore.sign_files(files, SIGNER) if repo_id in signed_ids else files, clear=True)
        repo.commit("release 1.0.0")
        repo.tag("v1.0.0")
    server.start()
    cache = work / "hf-cache"
    os.environ.update(
        {
            "HF_ENDPOINT": server.endpoint,
            "HF_HUB_CACHE": str(cache),
            "HF_HOME": str(work / "hf-home"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "XDG_STATE_HOME": str(work / "state"),
        }
    )  # the bench's own signature receipts
    receipts = private_directory("signatures")
    assert receipts is not None and receipts.is_relative_to(work)
    signed_app = project(work / "signed", signed_ids, trusted_root)
    unsigned_app = project(work / "unsigned", unsigned_ids, trusted_root)
    unexpected_app = project(work / "unexpected", unexpected_ids, trusted_root)
    results: dict[str, Any] = {
        "kernels": args.kernels,
        "variants_per_kernel": 5,
        "repeats": args.repeats,
        "machine": machine.description(),
    }

    results["load_average_before"] = round(os.getloadavg()[0], 2)
    policy = read_policy(Project(signed_app))
    requirements = {app: read_requirements(Project(app)) for app in (signed_app, unsigned_app)}

    def lock(app: Path):
        def run() -> None:
            resolve(
                HubSource.from_env(),
                requirements[app],
                None,
                upgrade=lambda _: True,
                checker=ReleaseChecker(policy, app),
            )

        return run

    lock(signed_app)()  # warm-up: imports (sigstore's included), connections, the test Hub's git caches
    lock(unsigned_app)()
    signed_locks, unsigned_locks = [], []
    for _ in range(args.repeats):
        signed_locks.append(median_time(lock(signed_app), 1))
        unsigned_locks.append(median_time(lock(unsigned_app), 1))
    results["lock_in_process_signed_s"] = statistics.median(signed_locks)
    results["lock_in_process_unsigned_s"] = statistics.median(unsigned_locks)
    results["lock_in_process_ratio"] = results["lock_in_process_signed_s"] / results["lock_in_process_unsigned_s"]

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    def keep_receipts() -> None:
        pass

    def no_receipts() -> None:
        shutil.rmtree(receipts, ignore_errors=True)

    def other_receipts() -> None:  # a user who verified other bundles before: the warm-up waits for the bytes
        no_receipts()
        PrivateFiles(receipts).write("of-other-bytes", b"{}")

    def command(
        app: Path,
        hub_cache: Path = cache,
        extra_env: dict[str, str] | None = None,
        receipts_before: Callable[[], None] = keep_receipts,
    ) -> Costs:
        (app / "kernelpin.lock").unlink(missing_ok=True)
        receipts_before()
        requests, hub_cpu, client_cpu = answered(server), server.cpu_seconds(), children_cpu()
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", LOCK],
            cwd=app,
            check=True,
            capture_output=True,
            text=True,
            env={**env, "HF_HUB_CACHE": str(hub_cache), **(extra_env or {})},
        )
        own = float(done.stderr.rpartition("OWN CPU ")[2].split()[0])
        return Costs(
            time.perf_counter() - start,
            children_cpu() - client_cpu,
            own,
            server.cpu_seconds() - hub_cpu,
            answered(server) - requests,
        )

    def empty_cache() -> Path:
        return Path(tempfile.mkdtemp(dir=work, prefix="hf-cache-"))

    def commands(
        key: str,
        hub_cache: Callable[[], Path],
        extra_env: dict[str, str] | None = None,
        receipts_before: Callable[[], None] = keep_receipts,
        against: tuple[str, Path] = ("signed", signed_app),
    ) -> None:
        """Rows `key_<kind>_*` of `against` and of the unsigned set, and `key_ratio`, the first over the second."""
        compared, app = against
        runs: dict[str, list[Costs]] = {compared: [], "unsigned": []}
        for _ in range(args.repeats):
            runs[compared].append(command(app, hub_cache(), extra_env, receipts_before))
            runs["unsigned"].append(command(unsigned_app, hub_cache(), extra_env, receipts_before))
        for kind, costs in runs.items():
            results[f"{key}_{kind}_s"] = statistics.median(cost.wall for cost in costs)
            results[f"{key}_{kind}_client_cpu_s"] = round(statistics.median(cost.client_cpu for cost in costs), 3)
            results[f"{key}_{kind}_own_cpu_s"] = round(statistics.median(cost.own_cpu for cost in costs), 3)
            results[f"{key}_{kind}_hub_cpu_s"] = round(statistics.median(cost.hub_cpu for cost in costs), 3)
            results[f"{key}_{kind}_requests"] = statistics.median(cost.requests for cost in costs)
        results[f"{key}_ratio"] = results[f"{key}_{compared}_s"] / results[f"{key}_unsigned_s"]

    command(signed_app)  # warm-up of the three sets alike
    command(unsigned_app)
    command(unexpected_app)
    commands("lock_command", lambda: cache)
    commands("lock_command_unexpected", lambda: cache, against=("unexpected", unexpected_app))
    commands("lock_command_no_receipts", lambda: cache, receipts_before=no_receipts)
    commands("lock_command_no_worker", lambda: cache, {"KERNELPIN_SIGNATURE_WORKER": "0"}, receipts_before=no_receipts)
    commands("lock_first", empty_cache, receipts_before=no_receipts)

    # load(): both sets synced, then loaded in fresh import states, rounds alternating.
    for app in (signed_app, unsigned_app):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert kernelpin_main(["--project", str(app), "sync", "--frozen", "--torch", "2.13"]) == 0
    import torch  # noqa: F401  (load needs torch; imported outside the timing)

    import kernelpin

    def forget() -> None:
        for name in list(sys.modules):
            if name.startswith("_kernelpin_"):
                del sys.modules[name]

    def loads(app: Path, repo_ids: list[str]):
        return lambda: [kernelpin.load(repo_id, lock=app / "kernelpin.lock") for repo_id in repo_ids]

    signed_loads, unsigned_loads = [], []
    for _ in range(args.repeats * 4):
        signed_loads.append(median_time(loads(signed_app, signed_ids), 1, forget) / args.kernels)
        unsigned_loads.append(median_time(loads(unsigned_app, unsigned_ids), 1, forget) / args.kernels)
    results["load_signed_ms"] = statistics.median(signed_loads) * 1e3
    results["load_unsigned_ms"] = statistics.median(unsigned_loads) * 1e3
    results["load_ratio"] = results["load_signed_ms"] / results["load_unsigned_ms"]

    server.stop()  # the same Hub (ports, repositories, olah's caches), now answering late
    server.latency = LATENCY
    server.start()
    results["latency_s"] = LATENCY
    command(signed_app, empty_cache())  # warm-up of the restarted test Hub, both sets alike
    command(unsigned_app, empty_cache())
    commands("lock_first_50ms", empty_cache, receipts_before=no_receipts)
    commands("lock_first_50ms_other_receipts", empty_cache, receipts_before=other_receipts)
    commands("lock_first_50ms_reads_8", empty_cache, {"KERNELPIN_READS": "8"}, receipts_before=no_receipts)
    results["load_average_after"] = round(os.getloadavg()[0], 2)
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "signatures.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
