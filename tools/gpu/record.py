"""Write what a GPU session checked into docs/verification.md: the script's own section, replaced as a whole.

    python -m tools.gpu.record OUT --script tools/gpu/session.sh [--commit REV] [--write FILE] [--doc FILE]

OUT is the folder that tools/gpu/session.sh or tools/gpu/stable_abi.sh filled: `steps.tsv` (one line per step:
name, exit status, seconds), `<step>.log` and `gpu.txt`. The section between the script's two marker comments
becomes a table of its steps, each with the summary line of its log (pytest's counts, compute-sanitizer's error
summary, else the log's last line); the rest of the doc is kept, and so are the rows of an earlier run of the
same commit for steps this run did not take (a session split over several calls, STEPS=... each). Both scripts call this last and write
OUT/verification.md (RECORD_INTO=FILE: there instead), updating what an earlier script of the same session
wrote there, else docs/verification.md; the file goes to docs/verification.md with the commit of the run.
Standard library only: it runs on the GPU machine's bare python.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "verification.md"
PYTEST_SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed|errors?|skipped|deselected)\b.*?)\s*=*$")
SANITIZER_SUMMARY = re.compile(r"ERROR SUMMARY: \d+ errors?")


@dataclass(frozen=True)
class Step:
    name: str
    rc: int
    seconds: int
    summary: str


def begin_marker(script: str) -> str:
    return f"<!-- begin {script}: written by python -m tools.gpu.record from the run; edits here are replaced -->"


def end_marker(script: str) -> str:
    return f"<!-- end {script} -->"


def summary_of(log: str) -> str:
    """The line of a step's log that says how it went."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    found = [match[1] for line in lines if (match := PYTEST_SUMMARY.match(line))][-1:]
    found += [match[0] for line in lines if (match := SANITIZER_SUMMARY.search(line))][-1:]
    text = "; ".join(found) or (lines[-1] if lines else "(empty log)")
    return text.replace("|", "\\|")[:200]


def read_steps(out: Path) -> list[Step]:
    steps = []
    listing = out / "steps.tsv"
    for line in listing.read_text().splitlines() if listing.is_file() else []:
        name, rc, seconds = line.split("\t")
        log = out / f"{name}.log"
        steps.append(
            Step(
                name,
                int(rc),
                int(seconds),
                summary_of(log.read_text(errors="replace")) if log.is_file() else "(no log)",
            )
        )
    return steps


def _section_pattern(script: str) -> re.Pattern[str]:
    return re.compile(re.escape(begin_marker(script).split(":")[0]) + r".*?" + re.escape(end_marker(script)), re.DOTALL)


def earlier_rows(doc: str, script: str, commit: str, steps: list[Step]) -> list[str]:
    """The rows of the doc's section for steps this run did not take, where that section is of the same commit."""
    found = _section_pattern(script).search(doc)
    if not found or f"\nCommit {commit}, " not in found[0]:
        return []
    taken = {step.name for step in steps}
    rows = [
        line for line in found[0].splitlines() if line.startswith("| ") and not line.startswith(("| step |", "| --- |"))
    ]
    return [row for row in rows if row.split(" | ")[0].removeprefix("| ") not in taken]


def section(script: str, commit: str, when: str, machine: str, steps: list[Step], kept: Sequence[str] = ()) -> str:
    rows = [
        *kept,
        *(
            f"| {s.name} | {'ok' if s.rc == 0 else f'FAILED (exit {s.rc})'} | {s.seconds} s | {s.summary} |"
            for s in steps
        ),
    ]
    table = (
        ["| step | result | time | summary of its log |", "| --- | --- | --- | --- |", *rows]
        if rows
        else ["No step ran (STEPS named none of the script's steps)."]
    )
    return "\n".join([begin_marker(script), f"Commit {commit}, {when}; {machine}.", "", *table, end_marker(script)])


def replace_section(doc: str, script: str, new: str) -> str:
    """The doc with the script's section replaced (appended when the doc has none yet)."""
    pattern = _section_pattern(script)
    if pattern.search(doc):
        return pattern.sub(lambda _: new, doc, count=1)
    return doc.rstrip("\n") + "\n\n" + new + "\n"


def this_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git here: pass --commit or COMMIT=)"
    return f"{head}{' with local changes' if dirty else ''}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the folder the GPU script wrote")
    parser.add_argument("--script", required=True, help="tools/gpu/session.sh or tools/gpu/stable_abi.sh")
    parser.add_argument("--commit", help="the commit that ran (default: git's HEAD here)")
    parser.add_argument("--write", type=Path, help="where to write the doc (default: OUT/verification.md)")
    parser.add_argument(
        "--doc",
        type=Path,
        help="the doc to update (default: the --write file where it exists, else docs/verification.md)",
    )
    args = parser.parse_args(argv)
    target = args.write or args.out / "verification.md"
    doc = args.doc or (target if target.is_file() else DOC)
    gpu = args.out / "gpu.txt"
    machine = (
        "; ".join(line.strip() for line in gpu.read_text().splitlines() if line.strip())
        if gpu.is_file()
        else "machine not recorded"
    )
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit, steps, text = args.commit or this_commit(), read_steps(args.out), doc.read_text()
    new = section(
        args.script, commit, when, machine or "no GPU found", steps, earlier_rows(text, args.script, commit, steps)
    )
    target.write_text(replace_section(text, args.script, new))
    print(f"{target}: the section of {args.script} written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
