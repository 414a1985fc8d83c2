"""The release loop on a GPU machine, offline: build the CUDA variant, pass the ABI gate, stage it, release it
into a kernel repository of a local Hub (olah + testkit/hub_front.py: tag v<version> and branch v<major>),
then load it both ways: `kernels.get_kernel(repo, version=<major>)` and, in a consumer project, kernelpin
lock/sync/load; the op runs on the GPU and must match the reference on examples/chelsea.png.

    PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH python3 -m testkit.gpu_e2e [--capability-builds] [--workdir DIR]
                                                                              [--json FILE]

Needs a CUDA build of torch, nvcc, and olah, kernels, kernels-data, kernel-abi-check + kernelpin's
dependencies importable (docs/releasing.md says how to carry them as wheels). `--device cpu` runs the same
loop with the CPU variant (the check of the script on a machine without a GPU). The last line printed is
`GPU E2E PASS: ...` or `GPU E2E FAIL: <step>: <why>` (with --device cpu: `E2E on CPU (...) PASS|FAIL ...`).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelpin.publisher.abi_gate import gate
from testkit.hub import HubServer
from testkit.releasing import (
    IMAGE,
    REPO_ID,
    build_command,
    consumer_project,
    hub_env,
    kernelpin,
    kernels_cli,
    kernels_get_and_check,
    load_and_check,
    release_into_mirror,
    run,
    stage,
)
from tools.builder import capability_builds as capability_builds_of
from tools.builder.config import BuildConfig

ROOT = Path(__file__).resolve().parents[1]


class StepFailed(Exception):
    def __init__(self, step: str, why: str) -> None:
        super().__init__(f"{step}: {why}")


def check(condition: bool, step: str, why: str) -> None:
    if not condition:
        raise StepFailed(step, why)


# The op on fixed inputs of every dtype and layout the CUDA kernels take, in a fresh process that imports one build
# directory (argv[1]) as a package; prints the sha256 of each output: a per-capability build and the fat build must
# print the same.
OUTPUT_DIGESTS = """
import hashlib, importlib.util, json, sys
from pathlib import Path
import torch
directory = Path(sys.argv[1])
spec = importlib.util.spec_from_file_location("img2gray_under_test", directory / "__init__.py",
                                              submodule_search_locations=[str(directory)])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
generator = torch.Generator().manual_seed(51)
cases = {
    "uint8 HWC 1080x1920": (torch.randint(0, 256, (1080, 1920, 3), dtype=torch.uint8, generator=generator), -1),
    "uint8 NCHW": (torch.randint(0, 256, (4, 3, 64, 80), dtype=torch.uint8, generator=generator), -3),
    "float32 NCHW": (torch.rand((2, 3, 257, 129), generator=generator), -3),
    "float16 CHW": (torch.rand((3, 300, 200), generator=generator).half(), -3),
    "bfloat16 CHW": (torch.rand((3, 64, 64), generator=generator).bfloat16(), -3),
    "float64 HWC": (torch.rand((33, 17, 3), generator=generator, dtype=torch.float64), -1),
}
digests = {}
for name, (tensor, dim) in cases.items():
    out = module.img2gray(tensor.cuda(), dim=dim)
    torch.cuda.synchronize()
    digests[name] = hashlib.sha256(out.cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
print(json.dumps(digests))
"""
# kernelpin.get_kernel in a fresh process (no lock): which build it took, and the op on the image vs the reference.
GET_KERNEL = """
import json, sys, warnings
import numpy as np, torch
from PIL import Image
import kernelpin
from testkit.consumer_check import reference
warnings.simplefilter("ignore")
module = kernelpin.get_kernel(sys.argv[1], version=int(sys.argv[2]))
rgb = np.asarray(Image.open(sys.argv[3]).convert("RGB"))
gray = module.img2gray(torch.from_numpy(rgb.copy()).cuda(), dim=-1, keepdim=False).cpu().numpy()
print(json.dumps({"build": module.__kernelpin_build__, "mismatches": int((gray != reference(rgb)).sum())}))
"""


def loop(
    work: Path,
    device: str,
    report: dict[str, Any],
    log: Callable[[str], None],
    abi: str = "exact",
    capability_builds: bool = False,
) -> None:
    import torch

    cuda = device == "cuda"
    version = BuildConfig.load().version
    if cuda:
        check(
            torch.version.cuda is not None and torch.cuda.is_available(),
            "environment",
            f"torch {torch.__version__} sees no CUDA GPU",
        )
        report["gpu"] = torch.cuda.get_device_name()
        report["capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
    report["torch"] = torch.__version__

    started = time.monotonic()
    variant_dir = work / "build" / "img2gray"
    builds = [] if not capability_builds else ["--capability-builds", str(capability_builds_of.beside(variant_dir))]
    run([*build_command(variant_dir, work / "objects", "on" if cuda else "off", abi), *builds], cwd=ROOT)
    metadata = json.loads((variant_dir / "metadata.json").read_text())
    report.update(variant=metadata["variant"], backend=metadata["backend"], build_s=round(time.monotonic() - started))
    check(metadata["backend"]["type"] == ("cuda" if cuda else "cpu"), "build", f"backend {metadata['backend']}")
    log(f"built {metadata['variant']} ({metadata['backend']}) in {report['build_s']} s")

    report["abi_gate_libraries"] = gate([variant_dir])  # raises AbiError naming each symbol and what to do
    log(f"ABI gate passed (manylinux_2_28, abi3): {report['abi_gate_libraries']} shared library file(s)")
    staged = stage([variant_dir], work / "staged", REPO_ID)
    hub = HubServer(work / "hub", trusted_publishers=(REPO_ID.split("/")[0],))  # kernelpin lock checks the publisher
    repo = hub.repo(REPO_ID, "kernel")
    commit = release_into_mirror(repo, staged, f"v{version}")
    major = int(version.split(".")[0])
    check(repo.refs()[1].get(f"v{major}") == commit, "release", f"branch v{major} not at v{version}")
    log(f"released v{version} (branch v{major}) as {commit[:12]} into the kernel repository {REPO_ID}")

    with hub:
        env = hub_env(hub.endpoint, work / "hf")
        # kernels 0.17.2 with HF_HUB_DISABLE_TELEMETRY=1 sends a User-Agent httpx rejects: not set for it.
        kernels_env = hub_env(hub.endpoint, work / "hf-kernels", HF_HUB_DISABLE_TELEMETRY="0")
        listed = kernels_cli(["versions", REPO_ID], kernels_env).stdout
        check(f"Version {major}:" in listed and metadata["variant"] in listed, "kernels versions", listed.strip())
        loaded = kernels_get_and_check(REPO_ID, major, kernels_env, device)
        report["kernels"] = loaded
        check(loaded["loaded"], "kernels.get_kernel", f"{loaded.get('type')}: {loaded.get('message')}")
        check(
            loaded["metadata"]["variant"] == metadata["variant"],
            "kernels.get_kernel",
            f"loaded {loaded['metadata']['variant']}",
        )
        check(loaded["device"].startswith(device), "kernels.get_kernel", f"ran on {loaded['device']}")
        check(loaded["mismatches"] == 0, "kernels op", f"{loaded['mismatches']} pixels differ from the reference")
        log(
            f"kernels.get_kernel({REPO_ID!r}, version={major}) loaded {loaded['metadata']['variant']}, op on "
            f"{loaded['device']}: 0 mismatches"
        )

        plan = json.loads(
            run(
                [sys.executable, "-m", "kernelpin", "publish", str(staged), "--repo", REPO_ID, "--dry-run", "--json"],
                env=env,
            ).stdout
        )
        check(plan["variants"] == [metadata["variant"]], "publish --dry-run", f"variants {plan['variants']}")
        refused = run(
            [sys.executable, "-m", "kernelpin", "publish", str(staged), "--repo", REPO_ID], env=env, check=False
        )
        check(
            refused.returncode == 1 and f"already has tag v{version}" in refused.stderr,
            "publish",
            f"moving tag v{version} was not refused: {refused.stderr.strip()}",
        )

        project = consumer_project(work / "app", f"^{version}", REPO_ID)
        kernelpin(["lock"], project, env)
        synced = json.loads(kernelpin(["sync", "--json"], project, env).stdout)["synced"]
        check([s["variant"] for s in synced] == [metadata["variant"]], "sync", f"synced {synced}")
        log(f"locked and synced {synced[0]['variant']} -> {synced[0]['directory']}")

        result = load_and_check(project, REPO_ID, env, device)
        report["op"] = result
        check(result["directory"] == synced[0]["directory"], "load", f"imported {result['directory']}")
        check(result["device"].startswith(device), "load", f"ran on {result['device']}")
        check(result["mismatches"] == 0, "op", f"{result['mismatches']} pixels differ from the reference")

        if capability_builds:
            slim(work, variant_dir, metadata, synced[0], result, env, report, log)

        if cuda:  # a GPU the build does not cover is refused by sync, before anything is imported
            old_gpu = {
                **env,
                "KERNELPIN_TORCH": ".".join(torch.__version__.split(".")[:2]),
                "KERNELPIN_CUDA": str(torch.version.cuda),  # a CUDA build of torch here
                "KERNELPIN_GPU_CAPABILITY": "7.5",
            }
            refused = kernelpin(["sync"], project, old_gpu, check=False)
            check(
                refused.returncode == 1 and "compute capability 7.5) is not a compiled target" in refused.stderr,
                "capability",
                f"sm_75 was not refused: {refused.stderr.strip()}",
            )


def slim(
    work: Path,
    variant_dir: Path,
    metadata: dict[str, Any],
    synced: dict[str, Any],
    loaded: dict[str, Any],
    env: dict[str, str],
    report: dict[str, Any],
    log: Callable[[str], None],
) -> None:
    """The per-capability build of this GPU (issue 51): what sync took and load imported, get_kernel's choice, and
    the outputs identical to the fat build's."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    listed = metadata.get("capability-builds", {})
    check(bool(listed), "capability builds", "the build's metadata.json lists none")
    expected = f"sm_{major}{minor}"
    check(synced.get("capability-build") == expected, "sync", f"took {synced.get('capability-build')}, not {expected}")
    check(Path(synced["directory"]).name == expected, "sync", f"installed into {synced['directory']}")
    check(loaded["directory"] == synced["directory"], "load", f"imported {loaded['directory']}")
    version = int(metadata["version"])
    got = json.loads(
        run(
            [sys.executable, "-c", GET_KERNEL, REPO_ID, str(version), str(IMAGE)], env=env, cwd=ROOT
        ).stdout.splitlines()[-1]
    )
    check(expected in got["build"] and got["mismatches"] == 0, "get_kernel", f"{got}")
    digests = {
        name: json.loads(run([sys.executable, "-c", OUTPUT_DIGESTS, str(directory)], cwd=ROOT).stdout.splitlines()[-1])
        for name, directory in (("fat", variant_dir), (expected, Path(synced["directory"])))
    }
    check(digests["fat"] == digests[expected], "identical", f"outputs differ: {digests}")
    sizes = {
        "fat_library": sum(p.stat().st_size for p in variant_dir.glob("*.so")),
        "slim_library": sum(p.stat().st_size for p in Path(synced["directory"]).glob("*.so")),
    }
    # The build tests/op and memcheck then run against: a copy named as the package is imported.
    op_dir = work / "slim-op" / "img2gray"
    shutil.rmtree(op_dir.parent, ignore_errors=True)
    shutil.copytree(Path(synced["directory"]), op_dir)
    report["slim"] = {
        "build": expected,
        "get_kernel": got["build"],
        "outputs": digests["fat"],
        **sizes,
        "op_build": str(op_dir),
    }
    log(
        f"per-capability build {expected}: synced, loaded and get_kernel'd; outputs of {len(digests['fat'])} cases "
        f"identical to the fat build's; library {sizes['slim_library']} bytes vs {sizes['fat_library']} fat"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--abi",
        choices=["exact", "stable"],
        default="exact",
        help="the build to release: exact (torch<maj><min>-...) or stable (torch-stable-abi...)",
    )
    parser.add_argument(
        "--capability-builds",
        action="store_true",
        help="CUDA: build and release per-capability builds too; check that sync, load and get_kernel take this "
        "GPU's and that its outputs are the fat build's (the report's `slim` names its directory for tests/op)",
    )
    parser.add_argument("--workdir", type=Path, help="keep builds, the Hub and logs here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    work = (args.workdir or Path(tempfile.mkdtemp(prefix="gpu-e2e-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"device": args.device, "python": platform.python_version(), "workdir": str(work)}
    try:
        loop(work, args.device, report, lambda line: print(line, flush=True), args.abi, args.capability_builds)
        report["result"] = "PASS"
    except StepFailed as failure:
        report["result"] = f"FAIL: {failure}"
    except Exception as error:  # noqa: BLE001  # the line below must say what broke, whatever it was
        report["result"] = f"FAIL: {type(error).__name__}: {str(error).strip()[-2000:]}"
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(summary_line(report))
    return 0 if report["result"] == "PASS" else 1


def summary_line(report: dict[str, Any]) -> str:
    """The last line: what ran and the result. With --device cpu it names the CPU loop, never "GPU" (no GPU ran)."""
    on_gpu = report["device"] == "cuda"
    label = "GPU E2E" if on_gpu else "E2E on CPU (the release loop with the CPU variant; no GPU was used)"
    if report["result"] != "PASS":
        return f"{label} {report['result']}"
    op = report.get("op", {})
    where = (
        f"{report.get('gpu')} (capability {report.get('capability')}), archs {report.get('backend', {}).get('archs')}"
        if on_gpu
        else "CPU"
    )
    return (
        f"{label} PASS: {report.get('variant')} on {where}, torch {report.get('torch')}, ABI gate passed, "
        f"kernels.get_kernel and kernelpin.load: op on {op.get('device')}, {op.get('mismatches')} mismatches "
        "vs reference"
    )


if __name__ == "__main__":
    sys.exit(main())
