"""The errors kernelpin reports to people: each says what is wrong and what to do about it.

A parser of input kernelpin does not control (a Hub's answers, a lock, a pyproject.toml, a kernel-status.toml, a
metadata.json, a variant name, a range, a Python source, an archive, a receipt, an environment variable) is named in
its module's `__untrusted_input__`: whatever it is handed, it returns a value or raises a KernelpinError whose first
line names the input, never another exception. tests/kernelpin/journeys/test_untrusted_parsers.py holds a property
test for every function so named and fails on one without. (A tuple of names, not a decorator: mutmut does not
mutate decorated functions.)
"""


class KernelpinError(Exception):
    """A problem the user can act on; the CLI prints its message and exits with status 1."""


class IntegrityError(KernelpinError):
    """A file's bytes do not match the hash the lock pinned for it."""


class NoVariantError(KernelpinError):
    """No build variant of a kernel fits this environment."""
