"""Issue 28 (14): Hub settings that cannot work are named as such before any request: an HF_HOME or
HF_HUB_CACHE that is a file is not "cannot reach <endpoint> ... check the network"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.hub.source import HubSettings, HubSource
from tests.kernelpin.helpers import REPO_ROOT


@pytest.mark.parametrize("name", ["HF_HOME", "HF_HUB_CACHE"])
def test_a_hub_home_or_cache_that_is_a_file_is_named(img2gray, project, cli, tmp_path, monkeypatch, name):
    # Failed before (HF_HOME): "cannot reach <endpoint> (NotADirectoryError); check the network", no request sent.
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    planted = tmp_path / "a-file"
    planted.write_text("not a directory\n")
    monkeypatch.setenv(name, str(planted))
    if name == "HF_HOME":
        monkeypatch.delenv("HF_HUB_CACHE")
    expected = (
        f"error: {name} is {planted}, a file, not a directory: huggingface_hub keeps the token and the Hub "
        f"cache there. Point {name} at a directory (or move the file away)\n"
    )
    if name == "HF_HOME":  # in a new process: huggingface_hub reads HF_HOME when it is imported
        done = subprocess.run(
            [sys.executable, "-m", "kernelpin", "lock", "--upgrade"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            timeout=120,
        )
        assert done.returncode == 1 and done.stderr == expected, done.stderr
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 1 and err == expected, err
    for loaded in [module for module in sys.modules if module.startswith("_kernelpin_acme_img2gray_")]:
        del sys.modules[loaded]  # loaded by another test: load() would return it without looking at the cache
    with pytest.raises(KernelpinError, match=f"^{name} is {planted}, a file"):
        kernelpin.load("acme/img2gray", lock=root)


def test_missing_directories_are_fine_they_are_made_when_needed(tmp_path):
    settings = HubSettings.from_env({"HF_HOME": str(tmp_path / "not-yet")})
    assert settings.cache_dir == tmp_path / "not-yet" / "hub"


@pytest.mark.parametrize("repo_type", ["kernel", "model", "dataset", "space"])
@pytest.mark.parametrize("path", ["build/x/metadata.json", "build/x/a b#?%.so", "build/x/ü/_ops.py"])
def test_a_files_url_is_the_one_huggingface_hub_makes(repo_type, path):
    # Made without importing huggingface_hub.file_download (about 12 ms, a twentieth of a cold get_kernel).
    from huggingface_hub import hf_hub_url

    source = HubSource(HubSettings.from_env({"HF_ENDPOINT": "http://127.0.0.1:1/mirror/"}))
    commit = "a" * 40
    assert source._file_url("acme/k", repo_type, commit, path) == hf_hub_url(
        "acme/k", path, repo_type=repo_type, revision=commit, endpoint="http://127.0.0.1:1/mirror"
    )
