"""The `kernelpin` command line's dispatch: the commands it has (COMMANDS), the parser, and main(). Each command is
one module of this package, kernelpin.cli.<name> (`describe-api`: describe_api), holding its options (`options`)
and its rendering (`run`) over one library function (kernelpin.commands, kernelpin.publisher.release); a command's
module is imported only when that command parses its arguments (it runs, or its help is shown), so `kernelpin lock`
loads neither sigstore's verifier for `verify` nor the publisher, and commands that need no torch never import it."""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NamedTuple, NoReturn

from kernelpin.errors import KernelpinError


class Command(NamedTuple):  # not a dataclass: `dataclasses` imports inspect and ast, ~40 modules before --help
    name: str
    help: str  # one line, in `kernelpin --help`'s list
    description: str  # what it does and what it reads and writes, opening its --help (as `uv help lock` does)
    json: bool = True  # takes --json

    @property
    def module(self) -> str:
        """The module with its options and rendering."""
        return f"kernelpin.cli.{self.name.replace('-', '_')}"


COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command(
            "lock",
            help="resolve [tool.kernels] and write kernelpin.lock",
            description="Resolve every requirement of [tool.kernels.dependencies] in pyproject.toml against the Hub's "
            "version tags and write kernelpin.lock: the commit, and the size and sha256 of every file of every "
            "variant. A requirement the lock already satisfies keeps its locked version unless --upgrade or "
            "--upgrade-package asks for the newest. Each release resolved passes the publisher policy of "
            "[tool.kernelpin.trust]: a trusted publisher, a Sigstore signature that verifies (offline), the "
            "signer recorded in the lock and kept across upgrades unless --accept-signer names the new one.",
        ),
        Command(
            "sync",
            help="download and verify the locked variant for this environment",
            description="Download the locked variant that fits this environment (torch, CUDA, GPU capability) into the "
            "Hub cache (or --target DIR) and verify every byte against kernelpin.lock. A stale lock is "
            "re-locked first unless --locked or --frozen says otherwise.",
        ),
        Command(
            "download",
            help="install what kernelpin.lock names, as it is (as `kernels download DIR`)",
            description="Install the kernels kernelpin.lock names, as the lock has them (nothing is resolved, as "
            "`sync --frozen`): this environment's variant of each (every locked variant with --all-variants) into "
            "the Hub cache, every byte verified against the lock. `kernels download DIR` does the same from "
            "kernels.lock; `kernelpin lock` keeps the two locks in step.",
        ),
        Command(
            "add",
            help="add kernels to pyproject.toml and re-lock",
            description="Add one or more kernels to [tool.kernels.dependencies] and re-lock. Without @RANGE the "
            "requirement is ^NEWEST (the newest release tag). When the lock cannot be written, "
            "pyproject.toml is put back as it was.",
        ),
        Command(
            "remove",
            help="remove kernels from pyproject.toml and re-lock",
            description="Remove one or more kernels from [tool.kernels.dependencies] and re-lock.",
        ),
        Command(
            "outdated",
            help="locked vs newest satisfying vs newest version",
            description="For each requirement: the locked version, the newest version the requirement allows, and the "
            "newest release. Upgrade with `kernelpin lock --upgrade` (or --upgrade-package REPO).",
        ),
        Command(
            "versions",
            help="list a kernel's versions and which satisfy the requirement",
            description="List a kernel repository's version tags, newest first, with which satisfy this project's "
            "requirement and which is locked; with --variants, which build of each version this machine "
            "(or another, described with --torch ...) would use.",
        ),
        Command(
            "variants",
            help="judge a kernel's builds for this machine (as `kernels variants`)",
            description="List every build variant of a kernel's newest major version (or --version N, --all-versions, "
            "--revision REV) and whether it fits this machine (or the one --torch ... describes): the one "
            "`load` and `get_kernel` would choose first, then the other builds that fit, then those that "
            "do not, each with the reason. `kernels variants` (0.18+) shows the same; `kernels versions`, "
            "which 0.19 deprecates, is `kernelpin variants --all-versions`.",
        ),
        Command(
            "info",
            help="show a kernel's license, upstream, backends and dependencies",
            description="Show what a kernel is, from its metadata.json at a revision (as `kernels info`): name, "
            "license, upstream, source, Python and kernel dependencies, the oldest kernels it needs, its "
            "backends and build variants. The revision is --version or --revision, else this project's "
            "requirement, else the newest major-version branch.",
        ),
        Command(
            "describe-api",
            help="list a kernel's public functions and layers from its Python sources",
            description="List a kernel's public functions (with their signatures) and its layers (with has_backward "
            "and can_torch_compile), read with Python's ast from the Python sources of the build this "
            "machine (or --torch ...) would load: only metadata.json and those sources are downloaded, "
            "into memory and checked against the listing and the metadata's digests; no binary is fetched "
            "and nothing is imported or run. `kernels describe-api` (0.18+) shows the same from a "
            "symbols.json that only recent builds carry.",
        ),
        Command(
            "verify",
            help="re-hash installed kernel files against the lock",
            description="Re-hash the installed files of every locked kernel against kernelpin.lock (the Hub cache, "
            "or a `sync --target` directory). Exit 1 when a file was modified or an unlisted one was added; "
            "`kernelpin sync` repairs them. --signatures also verifies each installed variant's Sigstore "
            "bundle and files against the policy and the signer the lock recorded.",
        ),
        Command(
            "verify-conda",
            help="check a conda environment's kernel: signed by an allowed identity, and the Hub build byte for byte",
            description="Check the kernels a conda environment holds (pixi add img2gray): (1) signature: the "
            "package's CEP 27 attestation, from its channel's CEP 50 sidecar, verifies with Sigstore and its signer "
            "passes the publisher policy of [tool.kernelpin.trust], as a Hub release's would; (2) bytes: every file "
            "of the installed variant equals the Hub build of that variant (the files kernelpin.lock pins, or the "
            "released variant's signed metadata.json). Exit 1 when either fails; each failure says which.",
        ),
        Command(
            "publish",
            help="upload a release layout (build/<variant>/), tag it v<version>, move branch v<major> to it",
            description="Upload a release layout (build/<variant>/..., each variant with its metadata.json) to a "
            "kernel repository, tag the commit v<version> and move the branch v<major> to it (what "
            "`kernels.get_kernel(repo, version=MAJOR)` loads). A checkout of this repository stages one with "
            "`python -m tools.release stage`; any directory in that layout works.",
        ),
        Command(
            "cache",
            help="show the cached kernels; prune revisions the lock does not use",
            description="Show what kernelpin keeps in the Hub cache (HF_HUB_CACHE): the kernel repositories, their "
            "revisions and sizes, and which revisions this project's kernelpin.lock uses. `kernelpin cache "
            "prune` lists the revisions of those repositories that the lock does not use; add --yes to "
            "delete them.",
        ),
        Command(
            "help",
            help="describe kernelpin or a command",
            json=False,
            description="Describe kernelpin or one of its commands.",
        ),
    )
}
# What each command does (the docs' checks read it).
DESCRIPTIONS = {name: spec.description for name, spec in COMMANDS.items()}


EXIT_CODES = """exit status:
  0    success
  1    failure the message explains: a stale lock under `lock --check` or `sync --locked`, files modified
       since they were verified (`verify`), a Hub or network error, a release that breaks a rule, ...
  2    usage error: unknown command or option, missing argument
  130  interrupted (Ctrl-C); files already verified are kept

`kernelpin help COMMAND` (or `kernelpin COMMAND --help`) describes a command.
"""
JSON_HELP = 'print machine-readable JSON on stdout (an error too: {"error": MESSAGE}, exit 1)'


def _close_matches(given: str, known: list[str], cutoff: float) -> list[str]:
    import difflib  # only on a usage error: not on every start

    return difflib.get_close_matches(given, known, n=1, cutoff=cutoff)


class _Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" on a mistyped command or option (as cargo and uv have)."""

    def error(self, message: str) -> NoReturn:
        choice = re.match(r"argument COMMAND: invalid choice: '([^']*)' \(choose from (.*)\)\Z", message)
        if choice:
            commands = re.findall(r"'([^']*)'", choice[2])
            close = _close_matches(choice[1], commands, cutoff=0.6)
            message = (
                f"unknown command '{choice[1]}'"
                + (f"; did you mean '{close[0]}'?" if close else "")
                + f" (commands: {', '.join(commands)})"
            )
        unknown = re.match(r"unrecognized arguments: (.*)\Z", message)
        if unknown:
            message = "; ".join(self._unknown_argument(given) for given in unknown[1].split(" "))
        super().error(message)

    def _unknown_argument(self, given: str) -> str:
        """`--upgade`: unknown option '--upgade'; did you mean '--upgrade'? (this command's options only)."""
        if not given.startswith("-"):
            return f"unexpected argument '{given}'"
        name = given.partition("=")[0]
        options = sorted(option for option in self._option_string_actions if option.startswith("--"))
        close = _close_matches(name, options, cutoff=0.7)
        return f"unknown option '{name}'" + (
            f"; did you mean '{close[0]}'?" if close else f" (`{self.prog} --help` lists its options)"
        )


def _global_options(defaults: bool) -> argparse.ArgumentParser:
    """-v, -q, --project, --offline, --color: accepted before the command and after it (`kernelpin lock -v`).

    The copy on each command has no defaults (SUPPRESS), so an option given before the command survives.
    """
    default = (lambda value: value) if defaults else (lambda value: argparse.SUPPRESS)
    options = _Parser(add_help=False)
    group = options.add_argument_group("global options")
    group.add_argument(
        "--project",
        metavar="DIR",
        default=default(None),
        help="the project (default: nearest pyproject.toml above the cwd)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default(False),
        help="explain more (what lock resolved, what sync fetched, tags that are not versions)",
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default(False),
        help="print only errors, warnings and --json output",
    )
    group.add_argument(
        "--offline",
        action="store_true",
        default=default(False),
        help="never contact the Hub: use the lock and the cache (as HF_HUB_OFFLINE=1)",
    )
    group.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default=default("auto"),
        help="colored output (auto: on a terminal, unless NO_COLOR is set)",
    )
    return options


class _PrintVersion(argparse.Action):
    """--version, reading the package metadata only when asked (importlib.metadata costs ~30 ms per start)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print kernelpin's version and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"kernelpin {version('kernelpin')}")
        except PackageNotFoundError:
            print("kernelpin (version unknown: not installed, no package metadata)")
        parser.exit()


class _CommandParser(_Parser):
    """One command's parser. Its options come from the command's module, imported the first time the parser
    parses, prints its usage or its help: only the command that runs is imported."""

    def __init__(self, *args: Any, command: Command, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.command = command
        self._options_added = False

    def command_module(self) -> ModuleType:
        module = importlib.import_module(self.command.module)
        if not self._options_added:
            self._options_added = True
            module.options(self)
            if self.command.json:
                self.add_argument("--json", action="store_true", help=JSON_HELP)
            if getattr(module, "EPILOG", None):  # kept as written: a table of other tools' flags
                self.epilog = module.EPILOG
                self.formatter_class = argparse.RawDescriptionHelpFormatter
        return module

    def parse_known_args(  # type: ignore[override]  # argparse's overloads, forwarded as they are
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.command_module()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.command_module()
        return super().format_usage()

    def format_help(self) -> str:
        self.command_module()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kernelpin",
        description="Pin, install and load Hub kernels for this project.",
        parents=[_global_options(defaults=True)],
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action=_PrintVersion)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    parser.set_defaults(top_parser=parser, subparsers=commands.choices)  # for `kernelpin help`
    global_options = _global_options(defaults=False)
    for spec in COMMANDS.values():
        sub = commands.add_parser(
            spec.name,
            parents=[global_options],  # type: ignore[list-item]  # typeshed wants the subparsers' class; any parser works
            help=spec.help,
            description=spec.description,
            command=spec,
        )
        sub.set_defaults(command_parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()  # `kernelpin` alone: what it can do, as cargo and uv print
        return 0
    # A usage error after the command gets that command's usage, not the top-level one.
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.quiet and args.verbose:
        args.command_parser.error("-q/--quiet and -v/--verbose contradict each other; give one")
    from kernelpin.cli.context import Context  # its consoles (rich) and the Hub settings: only for a command that runs

    ctx = Context(args)
    command: ModuleType = args.command_parser.command_module()
    try:
        status: int = command.run(ctx)
        return status
    except KernelpinError as error:
        return ctx.fail(str(error))
    except OSError as error:  # a read-only checkout or Hub cache, a full disk: the path and the cause, no traceback
        where = f"{error.filename}: " if error.filename else ""
        return ctx.fail(
            f"{where}{error.strerror or error}; check that path's permissions and free space "
            "(the Hub cache is HF_HUB_CACHE or HF_HOME/hub)"
        )
    except KeyboardInterrupt:
        ctx.err.print("interrupted; files already verified are kept, re-run to finish")
        return 130
