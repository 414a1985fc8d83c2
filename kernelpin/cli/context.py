"""What every command of the command line runs with: its parsed arguments, its two consoles, the project and the
Hub source (both made on first use), and the few renderings the commands share."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from kernelpin.errors import KernelpinError
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.project import PYPROJECT, Project, find_project
from kernelpin.terminal import SafeConsole

UNBOUNDED_WIDTH = 1 << 16  # columns, for output that is not a terminal
REPO_HELP = "a Hub repository id, ORG/NAME (e.g. acme/img2gray)"


def emit_json(data: Any, sort_keys: bool = True) -> None:
    """`data` as JSON on stdout; `sort_keys=False` where the keys follow a `kernels` command's order."""
    print(json.dumps(data, indent=2, sort_keys=sort_keys))


def count(number: int, noun: str) -> str:
    """`1 revision`, `2 revisions`: a count with its noun."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


class Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        # markup=False: messages quote TOML like [tool.kernels], which rich would take for style tags. Colour as
        # --color says; "auto" is rich's own rule (a terminal, and NO_COLOR unset).
        colour: dict[str, Any] = {"always": {"force_terminal": True}, "never": {"no_color": True}}.get(args.color, {})
        self.out = SafeConsole(
            highlight=False,
            soft_wrap=True,
            markup=False,
            quiet=args.quiet,
            width=None if sys.stdout.isatty() else UNBOUNDED_WIDTH,  # None: rich's own (the terminal's)
            **colour,
        )
        self.err = SafeConsole(stderr=True, highlight=False, soft_wrap=True, markup=False, **colour)  # never quiet

    def table(self, *columns: str, title: str | None = None) -> Table:
        """A bordered table on a terminal; into a pipe or a file, plain columns that `cut`/`awk` can split
        (no box characters, no cell cut short at 80 columns)."""
        if self.out.is_terminal:
            return Table(*columns, title=title)
        return Table(*columns, title=title, box=None, show_edge=False, pad_edge=False, title_justify="left")

    def show(self, table: Table) -> None:
        if self.out.is_terminal:
            self.out.print(table)
            return
        with self.out.capture() as captured:  # rich pads every cell to the column width; a pipe gets no trailing blanks
            self.out.print(table)
        self.out.print("\n".join(line.rstrip() for line in captured.get().splitlines()))

    def fail(self, message: str) -> int:
        """An error: one line on stderr, and with --json also {"error": message} on stdout (exit 1)."""
        if getattr(self.args, "json", False):
            emit_json({"error": message})
        self.err.print(f"error: {message}", style="red")
        return 1

    @functools.cached_property
    def source(self) -> HubSource:
        # Built on first use, inside main's error handling: the settings can be invalid (KERNELPIN_HTTP_TIMEOUT).
        settings = HubSettings.from_env()
        return HubSource(dataclasses.replace(settings, offline=True) if self.args.offline else settings)

    @functools.cached_property
    def project(self) -> Project:
        # Looked up on first use: `publish` works outside any project.
        directory = getattr(self.args, "directory", None)  # `lock DIR`, `download DIR`: as kernels takes it
        if directory is not None and self.args.project is not None and Path(directory) != Path(self.args.project):
            raise KernelpinError(
                f"DIR {directory} and --project {self.args.project} name two projects; give one of them"
            )
        given_text = self.args.project if self.args.project is not None else directory
        if given_text is None:
            return find_project(Path.cwd())
        given = Path(given_text)
        if not given.is_dir():
            problem = "is not a directory" if given.exists() else "does not exist"
            raise KernelpinError(
                f"--project {given}: the directory {problem}; give the directory of the project's pyproject.toml"
            )
        if (given / PYPROJECT).is_file():
            return Project(given.resolve())  # named by the user: trusted whoever owns it (as load(lock=PATH))
        return find_project(given)

    def project_if_any(self) -> Project | None:
        """The project, or None outside any (for the commands that work without one)."""
        try:
            return self.project
        except KernelpinError:
            return None

    def note(self, message: str) -> None:
        """Detail for -v."""
        if self.args.verbose:
            self.err.print(message, style="dim")

    def progress(self, message: str) -> None:
        """What a command did on the way, on stderr (stdout stays parseable with --json); silenced by -q."""
        if not self.args.quiet:
            self.err.print(message)

    def warn(self, message: str) -> None:
        self.err.print(f"warning: {message}", style="yellow")


def directory_argument(parser: argparse.ArgumentParser, command: str) -> None:
    """The project directory as a positional argument, as `kernels COMMAND DIR` takes it (the same as --project)."""
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help=f"the project's directory, as `kernels {command} DIR` takes it (the same as --project DIR); default: "
        "the project around the working directory",
    )


def ref_shown(ref: str | None) -> str | None:
    """A ref as `kernels` shows the revision it read: the branch or tag name (v1, not refs/heads/v1)."""
    return ref.removeprefix("refs/heads/").removeprefix("refs/tags/") if ref else None
