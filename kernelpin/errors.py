"""The errors kernelpin reports to people: each says what is wrong and what to do about it."""


class KernelpinError(Exception):
    """A problem the user can act on; the CLI prints its message and exits with status 1."""


class IntegrityError(KernelpinError):
    """A file's bytes do not match the hash the lock pinned for it."""


class NoVariantError(KernelpinError):
    """No build variant of a kernel fits this environment."""
