"""The warning filters of pyproject.toml hide exactly the warnings they name, from where they name."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILTERS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["filterwarnings"]


def test_script_method_filter_matches_torchs_own_warning():
    [rule] = [f for f in FILTERS if "script_method" in f]
    _action, message, category, module = rule.split(":")[:4]
    import torch.utils.mkldnn

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.reload(torch.utils.mkldnn)  # what torch.compile's CPU path imports
    script_method = [w for w in caught if "script_method" in str(w.message)]
    assert script_method, "torch no longer warns here: remove the filter from pyproject.toml"
    for warning in script_method:
        assert re.match(re.escape(message), str(warning.message)) and warning.category.__name__ == category
        assert Path(warning.filename).as_posix().endswith(module.replace(".", "/") + ".py")


def test_script_filter_matches_torchs_own_warning_only():
    """torch's jvp decompositions call torch.jit.script when first imported (forward-mode AD); the filter hides
    that warning and no other (the script_method one has its own rule)."""
    [rule] = [f for f in FILTERS if "`torch.jit.script`" in f]
    action, message, category, module = rule.split(":")[:4]
    assert action == "ignore"
    probe = (
        "import sys, warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import torch._decomp.decompositions_for_jvp\n"
        "for w in caught:\n"
        "    print(w.category.__name__, '|', w.filename, '|', str(w.message).splitlines()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    scripted = [line for line in done.stdout.splitlines() if "`torch.jit.script`" in line]
    assert scripted, "torch no longer warns here: remove the filter from pyproject.toml"
    for line in scripted:
        kind, filename, text = (part.strip() for part in line.split("|"))
        assert re.match(re.escape(message), text) and kind == category
        assert Path(filename).as_posix().endswith(module.replace(".", "/") + ".py")
    assert not re.match(re.escape(message), "`torch.jit.script_method` is deprecated")  # one rule, one warning


def test_no_repository_code_uses_torchscript():
    found = subprocess.run(
        ["git", "grep", "-n", "-e", "torch.jit", "--", "*.py", ":!tests/test_pytest_config.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert found.stdout == "", found.stdout
