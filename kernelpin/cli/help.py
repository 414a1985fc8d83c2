"""`kernelpin help [COMMAND]`: kernelpin's own --help, or a command's."""

from __future__ import annotations

import argparse

from kernelpin.cli.context import Context


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", nargs="?", metavar="COMMAND", help="the command to describe")


def run(ctx: Context) -> int:
    parser, subparsers, topic = ctx.args.top_parser, ctx.args.subparsers, ctx.args.topic
    if topic is None:
        parser.print_help()
        return 0
    if topic not in subparsers:
        parser.error(f"argument COMMAND: invalid choice: '{topic}' (choose from {', '.join(map(repr, subparsers))})")
    subparsers[topic].print_help()
    return 0
