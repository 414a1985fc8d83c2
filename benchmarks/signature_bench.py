"""What verifying signatures costs: `lock` of N signed kernels with verification vs without, and `load()` of
signed kernels vs unsigned ones, on the test Hub (olah) with the test kit's Sigstore instance.

    python -m benchmarks.signature_bench [--kernels 20] [--repeats 5]

- lock, in-process (cold: a new HubSource, no lock): the same 20 signed repositories (5 variants each, so 100
  bundles), resolved with the publisher policy's checker (every bundle verified by sigstore-python) and without
  it (the bundles are hashed like any file); rounds alternate;
- the same as commands in fresh processes (`python -m kernelpin lock`): start-up and sigstore's import included,
  signed repositories vs the same content unsigned;
- load(): 20 signed vs 20 unsigned kernels, already synced, each round in a fresh import state (load checks the
  lock's recorded signer against the policy: no cryptography; the bundle is one more locked file to re-hash).
Every variant is shaped like img2gray's CPU build (the files and sizes of `build/dev`, a 372 KB library).

Prints the medians and ratios as JSON and writes benchmarks/results/cpu/signatures.json. Compare ratios, not
absolute times: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
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
from pathlib import Path

from kernelpin.cli import main as kernelpin_main
from kernelpin.project import Project, read_policy, read_requirements
from kernelpin.resolve import resolve
from kernelpin.signature import ReleaseChecker
from kernelpin.source import HubSettings, HubSource
from benchmarks.kernelpin_bench import median_time
from testkit.fake_kernel import kernel_files
from testkit.hub import HubServer
from testkit.sigstore_root import Identity, SigstoreRoot

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results" / "cpu"  # the machine the test Hub runs on: one set per machine
SIGNER = Identity(repository="acme/kernels", workflow=".github/workflows/release.yaml", ref="refs/tags/v1.0.0")
# Each variant shaped like img2gray's CPU build (build/dev): its files' count and sizes, the library included
# (hashed at load like any listed file; the fake kernel never opens it).
SHAPE = {"_img2gray_bench.abi3.so": 371_632, "functional.py": 7_733, "stable_abi.py": 6_328, "_ops.py": 589,
         "img2gray/__init__.py": 120}


def project(root: Path, repo_ids: list[str], trusted_root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n'
        + "".join(f'"{repo_id}" = "^1"\n' for repo_id in repo_ids)
        + f'\n[tool.kernelpin.trust]\ntrusted-root = "{trusted_root}"\n'
        + '[tool.kernelpin.trust.publishers.acme]\nsigners = [{ repository = "acme/kernels" }]\n')
    return root


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kernelpin-signature-bench-"))
    sigstore = SigstoreRoot()
    trusted_root = sigstore.write_trusted_root(work / "trusted_root.json")
    server = HubServer(work / "hub", trusted_publishers=("acme",))
    signed_ids = [f"acme/signed-{i:02d}" for i in range(args.kernels)]
    unsigned_ids = [f"acme/unsigned-{i:02d}" for i in range(args.kernels)]
    for repo_id in signed_ids + unsigned_ids:
        repo = server.repo(repo_id, repo_type="kernel")
        files = kernel_files("1.0.0", extra={path: os.urandom(size) if path.endswith(".so") else b"#" * size
                                             for path, size in SHAPE.items()})
        repo.write(sigstore.sign_files(files, SIGNER) if repo_id in signed_ids else files, clear=True)
        repo.commit("release 1.0.0")
        repo.tag("v1.0.0")
    server.start()
    cache = work / "hf-cache"
    os.environ.update({"HF_ENDPOINT": server.endpoint, "HF_HUB_CACHE": str(cache), "HF_HOME": str(work / "hf-home"),
                       "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"})
    signed_app = project(work / "signed", signed_ids, trusted_root)
    unsigned_app = project(work / "unsigned", unsigned_ids, trusted_root)
    results: dict[str, object] = {
        "kernels": args.kernels, "variants_per_kernel": 5, "repeats": args.repeats,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }

    requirements = read_requirements(Project(signed_app))
    policy = read_policy(Project(signed_app))

    def lock(verify: bool):
        def run() -> None:
            checker = ReleaseChecker(policy, signed_app) if verify else None
            resolve(HubSource(HubSettings.from_env()), requirements, None, upgrade=lambda _: True, checker=checker)
        return run

    lock(True)()  # warm-up: imports (sigstore's included), connections, olah's git caches
    lock(False)()
    with_verification, without = [], []
    for _ in range(args.repeats):
        with_verification.append(median_time(lock(True), 1))
        without.append(median_time(lock(False), 1))
    results["lock_in_process_verified_s"] = statistics.median(with_verification)
    results["lock_in_process_unverified_s"] = statistics.median(without)
    results["lock_in_process_ratio"] = results["lock_in_process_verified_s"] / results["lock_in_process_unverified_s"]

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    def command(app: Path) -> float:
        (app / "kernelpin.lock").unlink(missing_ok=True)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "kernelpin", "lock"], cwd=app, env=env, check=True,
                       capture_output=True)
        return time.perf_counter() - start

    signed_runs, unsigned_runs = [], []
    for _ in range(args.repeats):
        signed_runs.append(command(signed_app))
        unsigned_runs.append(command(unsigned_app))
    results["lock_command_signed_s"] = statistics.median(signed_runs)
    results["lock_command_unsigned_s"] = statistics.median(unsigned_runs)
    results["lock_command_ratio"] = results["lock_command_signed_s"] / results["lock_command_unsigned_s"]

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
    server.stop()
    shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "signatures.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
