"""tools/gpu/record.py: the GPU scripts write what passed on which commit into docs/verification.md, their own
section only, from the logs of the run (checked here without a GPU: real pytest logs, the real session script)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tools.gpu.record import begin_marker, end_marker, main, read_steps, replace_section, summary_of

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "verification.md"
SCRIPTS = ("tools/gpu/session.sh", "tools/gpu/stable_abi.sh")


def _section(doc: str, script: str) -> str:
    return doc[doc.index(begin_marker(script)) : doc.index(end_marker(script)) + len(end_marker(script))]


def _pytest_log(tmp_path: Path) -> str:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n\ndef test_ok():\n    pass\n\n@pytest.mark.skip(reason='a second GPU')\ndef test_two():\n    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sample.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    return done.stdout + done.stderr


def test_the_doc_has_a_section_for_each_gpu_script() -> None:
    doc = DOC.read_text()
    for script in SCRIPTS:
        assert doc.count(begin_marker(script)) == 1 and doc.count(end_marker(script)) == 1, script
        assert f'-m tools.gpu.record "$OUT" --script {script} ' in (ROOT / script).read_text(), script


def test_a_summary_is_pytests_counts_and_the_sanitizers_error_count(tmp_path: Path) -> None:
    log = _pytest_log(tmp_path)
    assert summary_of(log).startswith("1 passed, 1 skipped in ")
    assert summary_of(log + "========= ERROR SUMMARY: 0 errors\n").endswith("; ERROR SUMMARY: 0 errors")
    assert (
        summary_of("building\nPASS: --cuda on builds are bit-identical\n\n")
        == "PASS: --cuda on builds are bit-identical"
    )
    assert summary_of("") == "(empty log)"


def test_the_scripts_section_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "tests.log").write_text(_pytest_log(tmp_path))
    (out / "repro.log").write_text("FAIL: the two builds differ | metadata.json\n")
    (out / "steps.tsv").write_text("tests\t0\t118\nrepro\t1\t40\nconda\t0\t3\n")
    (out / "gpu.txt").write_text("NVIDIA H200, 580.159.04\ntorch 2.11.0+cu130 cuda 13.0\n")
    assert [(s.name, s.rc, s.seconds) for s in read_steps(out)] == [
        ("tests", 0, 118),
        ("repro", 1, 40),
        ("conda", 0, 3),
    ]
    assert main([str(out), "--script", "tools/gpu/session.sh", "--commit", "0123abcdef", "--doc", str(DOC)]) == 0
    written = (out / "verification.md").read_text()
    section = _section(written, "tools/gpu/session.sh")
    assert "Commit 0123abcdef, " in section and "NVIDIA H200, 580.159.04; torch 2.11.0+cu130 cuda 13.0." in section
    assert "| tests | ok | 118 s | 1 passed, 1 skipped in " in section
    assert "| repro | FAILED (exit 1) | 40 s | FAIL: the two builds differ \\| metadata.json |" in section
    assert "| conda | ok | 3 s | (no log) |" in section
    doc = DOC.read_text()
    assert written.replace(section, "") == doc.replace(_section(doc, "tools/gpu/session.sh"), "")
    # A second script of the same session reads what the first wrote.
    assert main([str(out), "--script", "tools/gpu/stable_abi.sh", "--commit", "0123abcdef"]) == 0
    both = (out / "verification.md").read_text()
    assert _section(both, "tools/gpu/session.sh") == section and "| tests | ok |" in _section(
        both, "tools/gpu/stable_abi.sh"
    )


def test_a_session_split_over_calls_keeps_the_earlier_steps_of_its_commit(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()

    def run(steps: str, commit: str) -> str:
        (out / "steps.tsv").write_text(steps)
        assert main([str(out), "--script", "tools/gpu/session.sh", "--commit", commit]) == 0
        return _section((out / "verification.md").read_text(), "tools/gpu/session.sh")

    run("build\t0\t90\ntests\t1\t100\n", "0123abcdef")
    second = run("tests\t0\t110\nbench\t0\t200\n", "0123abcdef")  # tests again, then the rest
    assert [
        row.split(" | ")[:3] for row in second.splitlines() if row.startswith(("| build", "| tests", "| bench"))
    ] == [["| build", "ok", "90 s"], ["| tests", "ok", "110 s"], ["| bench", "ok", "200 s"]]
    other = run("bench\t0\t201\n", "fedcba9876")  # another commit starts afresh
    assert "| build |" not in other and "| tests |" not in other and "| bench | ok | 201 s |" in other


def test_a_doc_without_the_section_gets_it_appended() -> None:
    new = f"{begin_marker('x.sh')}\nbody\n{end_marker('x.sh')}"
    assert replace_section("# Records\n", "x.sh", new) == f"# Records\n\n{new}\n"
    assert replace_section(replace_section("# Records\n", "x.sh", new), "x.sh", new) == f"# Records\n\n{new}\n"


def _run_session(out: Path, **env: str) -> None:
    env = {**os.environ, "OUT": str(out), "STEPS": "none", "PYTHON": sys.executable, **env}
    done = subprocess.run(["bash", "tools/gpu/session.sh"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_the_session_script_writes_the_record_of_its_run(tmp_path: Path) -> None:
    # Failed before: tools/gpu/session.sh left no record; the README carried the runs' results by hand.
    _run_session(tmp_path, COMMIT="feedc0de42")
    section = _section((tmp_path / "verification.md").read_text(), "tools/gpu/session.sh")
    assert "Commit feedc0de42, " in section and "No step ran" in section
    assert DOC.read_text().count("feedc0de42") == 0  # the checkout's doc is left alone


def test_record_into_updates_what_an_earlier_run_wrote(tmp_path: Path) -> None:
    # Each script with its own OUT, one doc for both (RECORD_INTO).
    shared = tmp_path / "verification.md"
    doc = DOC.read_text()
    stable = _section(doc, "tools/gpu/stable_abi.sh")
    earlier = stable.replace(stable.split("\n")[1], "Commit 5ab1e00000, an earlier run.")
    shared.write_text(doc.replace(stable, earlier))
    _run_session(tmp_path / "exact", COMMIT="feedc0de42", RECORD_INTO=str(shared))
    written = shared.read_text()
    assert _section(written, "tools/gpu/stable_abi.sh") == earlier
    assert "Commit feedc0de42, " in _section(written, "tools/gpu/session.sh")
    assert not (tmp_path / "exact" / "verification.md").exists()
