"""`kernel-status.toml`: a kernel repository's note that it moved, in the format `kernels` parses
(kernels._internals.status, 0.17.2 to 0.19.1, which nothing in `kernels` calls yet):

    kind = "redirect"                 # required; the only kind there is
    destination = "org/new-name"      # required: the repository to use instead
    revision = "v2"                   # optional: a tag, branch or commit there

`kernels` reads an absent `revision` as "main"; kernelpin as "the same requirement, on the destination" (a
version asked of the old repository is asked of the new one), the one difference.
"""

from __future__ import annotations

import tomllib

from kernelpin.errors import KernelpinError
from kernelpin.format.layout import STATUS_FILE
from kernelpin.format.nesting import within_nesting
from kernelpin.format.spec import check_repo_id
from kernelpin.records import record

__untrusted_input__ = ("parse_status",)  # parsers of input kernelpin does not control (kernelpin.errors)

MAX_STATUS_SIZE = 64 * 1024


@record
class Redirect:
    destination: str
    revision: str | None  # None: the requirement as asked, on the destination


def parse_status(content: bytes, where: str) -> Redirect:
    """The redirect a kernel-status.toml states; KernelpinError names what is wrong with it."""

    def broken(problem: str) -> KernelpinError:
        return KernelpinError(f"{where}: {problem}; the repository's {STATUS_FILE} is broken: ask its publisher")

    if len(content) > MAX_STATUS_SIZE:
        raise broken(f"{len(content)} bytes, over {MAX_STATUS_SIZE}")
    try:
        data = within_nesting(tomllib.loads(content.decode("utf-8")))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise broken(f"not TOML ({str(error)[:120]})") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively: 500 deep fit in 1 KB
        raise broken("nested deeper than TOML is parsed") from None
    if data.get("kind") != "redirect":
        raise broken(f'kind must be "redirect", not {str(data.get("kind"))[:40]!r}')
    destination, revision = data.get("destination"), data.get("revision")
    if not isinstance(destination, str) or not destination:
        raise broken("no destination")
    try:
        check_repo_id(destination)
    except KernelpinError as error:
        raise broken(f"destination: {error}") from None
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise broken("revision must be a tag, branch or commit (a string)")
    return Redirect(destination, revision.strip() if revision else None)
