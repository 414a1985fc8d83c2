"""The docs say what is there: every relative link and path they name exists, every `./dev`, `kernelpin`,
`python -m` and `pixi run` command they give exists, and the local-Hub walkthrough of docs/kernelpin.md runs as
written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from kernelpin.cli import DESCRIPTIONS
from testkit.hub import free_port
from tests.markdown import code_blocks

ROOT = Path(__file__).resolve().parents[1]
# Every markdown file git tracks (the results' pages and tools/' READMEs too).
DOCS = [
    ROOT / path
    for path in subprocess.run(
        ["git", "ls-files", "-z", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    if path
]
# Written by builds and runs, not kept in git: a doc may name them though a fresh clone lacks them.
GENERATED = (
    "build/",
    "output/",
    ".venv",
    "examples/chelsea.gray.png",
    "kernelpin.lock",
    "kernels.lock",
    "vendor/",
    "tools/ci/node/node_modules",
    ".pixi",
)
# Paths that look like this checkout's but name another project's files.
ELSEWHERE = {"recipe/conda_build_config.yaml"}  # conda-forge-pinning's global pinning file
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
CODE = re.compile(r"(?<!`)`(?P<code>[^`]+)`(?!`)")  # inline code, which may wrap across lines
PATH_LIKE = re.compile(r"^\.{0,2}/?[\w.*-]+(/[\w.*-]*)+$")


def _words(doc: Path) -> list[str]:
    text = re.sub(
        r"^[ \t]*```.*?^[ \t]*```", "", doc.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL
    )  # no blocks
    return [" ".join(m["code"].split()) for m in CODE.finditer(text)]


def _exists(doc: Path, path: str) -> bool:
    path = path.split("#")[0]
    if path.startswith(GENERATED):
        return True
    for base in (ROOT, doc.parent):
        if any(base.glob(path.rstrip("/"))) if "*" in path else (base / path).exists():
            return True
        if (base / path).resolve().is_relative_to(ROOT) and (base / path).resolve().relative_to(
            ROOT
        ).as_posix().startswith(GENERATED):
            return True
    return False


def _names_a_repository_path(doc: Path, token: str) -> bool:
    """A relative path whose first directory is one of the checkout's (or the doc's folder's): `tools/x.py`,
    `results/h200.json`; not `site-packages/img2gray/` or `refs/tags/v1`, which name places elsewhere."""
    first = token.removeprefix("./").split("/")[0]
    if token in ELSEWHERE or token.startswith(
        ("../", "/")
    ):  # `../x` in inline code is relative to a folder the text names
        return False
    return "/" in token and ((ROOT / first).exists() or (doc.parent / first).exists())


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_relative_links_and_paths_exist(doc: Path) -> None:
    missing = []
    for match in LINK.finditer(doc.read_text(encoding="utf-8")):
        target = match["target"]
        if not re.match(r"^[a-z]+:", target) and not target.startswith("#") and not _exists(doc, target):
            missing.append(f"link {target}")
    for word in _words(doc):
        for token in (part.strip(",;:()") for part in word.split()):
            if (
                PATH_LIKE.match(token)
                and _names_a_repository_path(doc, token)
                and not re.search(r"[<>{}$]|\.\.\.", token)
                and not _exists(doc, token)
            ):
                missing.append(f"path {token}")
    assert not missing, f"{doc.relative_to(ROOT)} names what is not there: {missing}"


def _dev_commands() -> set[str]:
    return set(re.search(r'^COMMANDS="([^"]+)"', (ROOT / "dev").read_text(), re.MULTILINE)[1].split())


def _pixi_tasks() -> set[str]:
    tasks = {"python"}  # `pixi run python ...`: a command in the environment, not a task
    for manifest in (ROOT / "pixi.toml", ROOT / "examples" / "consumer" / "pixi.toml"):
        workspace = tomllib.loads(manifest.read_text())
        tasks |= set(workspace.get("tasks", {}))
        for feature in workspace.get("feature", {}).values():
            tasks |= set(feature.get("tasks", {}))
    return tasks


def _module_exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_commands_exist(doc: Path) -> None:
    # Inline code, and shell blocks' command lines without their comments (a TOML or Python block's comments are
    # prose).
    shell = [
        line.split(" #")[0]
        for block in code_blocks(doc)
        if block.language in ("bash", "sh", "console", "")
        for line in block.text.splitlines()
    ]
    text = "\n".join(_words(doc) + shell)
    wrong = []
    for command in re.findall(r"(?:^|\s)\./dev\s+([a-z][\w-]*)", text):
        if command not in _dev_commands():
            wrong.append(f"./dev {command}")
    for command in re.findall(r"(?:^|[\s`])kernelpin[ \t]+(?:-\S+[ \t]+)*([a-z][\w-]*)", text, re.MULTILINE):
        if command not in DESCRIPTIONS:
            wrong.append(f"kernelpin {command}")
    for module in re.findall(r"python -m ([\w.]+)(?![\w.<])", text):  # not `tools.<job>.<name>`
        if module.split(".")[0] in ("tools", "testkit", "benchmarks", "kernelpin") and not _module_exists(module):
            wrong.append(f"python -m {module}")
    for task in re.findall(r"pixi run (?:-e \w+ )?([a-z][\w-]*)", text):
        if task not in _pixi_tasks():
            wrong.append(f"pixi run {task}")
    assert not wrong, f"{doc.relative_to(ROOT)} gives commands that do not exist: {wrong}"


def _walkthrough(step: str):
    [block] = [
        b for b in code_blocks(ROOT / "docs" / "kernelpin.md") if (b.comment or "").startswith(f"walkthrough: {step}")
    ]
    return block


def test_dev_hub_is_the_local_hub_module() -> None:
    assert _walkthrough("serve").text.split("#")[0].split() == ["./dev", "hub"]
    assert 'exec python -m testkit.local_hub --variant build/dev/img2gray "$@"' in (ROOT / "dev").read_text()


def test_local_hub_walkthrough(checkout_build: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "KERNELPIN_"))}
    env.update(PYTHONPATH=str(ROOT), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")
    # `./dev hub` runs this after ./dev setup; here with the build of this test run.
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "testkit.local_hub",
            "--port",
            str(port),
            "--root",
            str(tmp_path / "hub"),
            "--variant",
            str(checkout_build),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [server.stdout.readline() for _ in range(3)]
        assert f"  export HF_ENDPOINT=http://127.0.0.1:{port}\n" in lines, [*lines, server.stderr.read()]
        steps = (
            _walkthrough("steps").text.replace("8765", str(port)).replace("/tmp/kernelpin-try", str(tmp_path / "try"))
        )
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", steps], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert "torch.Size([1, 4, 4])" in done.stdout and "acme/img2gray  ^0.1" in done.stdout
        # The warning the walkthrough announces is the one the first lock prints.
        announced = re.search(
            r"`(warning: acme/img2gray [^`]*)\(\.\.\.\)([^`]*)`", (ROOT / "docs" / "kernelpin.md").read_text()
        )
        assert announced and re.search(re.escape(announced[1]) + r"\([^)]*\)" + re.escape(announced[2]), done.stderr)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert server.returncode == 0


def _shape(value: object) -> object:
    """The keys of a JSON document, recursively (file names under digest.files aside: they name the build)."""
    if isinstance(value, dict):
        return {key: (type(item).__name__ if key == "files" else _shape(item)) for key, item in value.items()}
    return type(value).__name__


def test_design_shows_the_metadata_json_a_build_writes(checkout_build: Path) -> None:
    # Failed before: DESIGN.md showed "version": "0.1.0" and hex digests, not what compose writes.
    import json

    [block] = [b for b in code_blocks(ROOT / "docs" / "DESIGN.md") if (b.comment or "").startswith("checked by")]
    shown = json.loads(block.text)
    built = json.loads((checkout_build / "metadata.json").read_text())
    if built["backend"]["type"] == "cuda":  # the doc shows the CPU build; a CUDA one adds its archs and version
        built["backend"], built["provenance"]["cuda"] = shown["backend"], shown["provenance"]["cuda"]
    assert _shape(shown) == _shape(built)
    assert isinstance(shown["version"], int) and shown["semver"].count(".") == 2
    digest = next(iter(shown["digest"]["files"].values()))
    assert len(digest) == 44 and digest.endswith("=")  # base64 of 32 bytes, not 64 hex digits
