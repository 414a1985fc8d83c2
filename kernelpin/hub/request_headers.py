"""The headers of kernelpin's own requests to a Hub: who sends them, and the token that authorizes them.

Imports no HTTP library: the requests themselves go over kernelpin.hub.wire (the standard library's http.client),
and huggingface_hub's HTTP stack is imported only where a token source needs its get_token.
"""

from __future__ import annotations

import os
import platform
import re
import sys

from kernelpin.errors import KernelpinError

_HEADER_VALUE = r"[\x21-\x7e]+"  # a token as the Hub issues it: printable ASCII, no space (compiled when first used)


def request_headers() -> dict[str, str]:
    """The headers of kernelpin's own requests, built here and not by huggingface_hub's build_hf_headers: its
    User-Agent carries an agent-harness id from `<endpoint>/api/agent-harnesses`, fetched while the headers
    are built and kept in HF_HOME for a day, so one hostile Hub's answer would go into every request to every
    Hub (or make each fail). This sends kernelpin's name and versions, and the token huggingface_hub would
    send (HF_TOKEN or the saved one, unless HF_HUB_DISABLE_IMPLICIT_TOKEN), refused when no header can carry it."""
    from huggingface_hub import __version__ as hub_version

    headers = {"user-agent": f"kernelpin; hf_hub/{hub_version}; python/{platform.python_version()}"}
    token = implicit_token()
    if token is not None:
        if not re.fullmatch(_HEADER_VALUE, token):
            raise KernelpinError(
                "the Hub token (HF_TOKEN, or the one `hf auth login` saved) holds spaces, control or non-ASCII "
                "characters, which no request header can carry; set HF_TOKEN to the token exactly as the Hub shows it"
            )
        headers["authorization"] = f"Bearer {token}"
    return headers


def implicit_token() -> str | None:
    """The token huggingface_hub sends unasked (its get_token), None under HF_HUB_DISABLE_IMPLICIT_TOKEN.
    get_token is called only where one of its sources can give a token (an OIDC exchange, HF_TOKEN or
    HUGGING_FACE_HUB_TOKEN, the token file, Google Colab's secrets): importing it imports huggingface_hub's HTTP
    stack, a YAML parser and a file-lock library (for refreshing a saved OAuth token), spent for nothing where
    no token exists."""
    from huggingface_hub import constants

    if constants.HF_HUB_DISABLE_IMPLICIT_TOKEN:
        return None
    if not os.environ.get("HF_OIDC_RESOURCE"):  # get_token asks OIDC first, and only where this is set
        # get_token's next two sources read here as it reads them, for the tokens most users have: HF_TOKEN, or
        # the file `hf auth login` saves holding a token without an OAuth refresh (those get_token returns as read).
        token = _clean_token(os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"))
        if token is not None:
            return token
        token = _plain_saved_token(constants.HF_TOKEN_PATH, constants.HF_STORED_TOKENS_PATH)
        if token is not None:
            return token
    from_environment = any(os.environ.get(name) for name in ("HF_OIDC_RESOURCE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"))
    if not (from_environment or _in_google_colab() or _exists(constants.HF_TOKEN_PATH)):
        return None
    from huggingface_hub import get_token

    return get_token()


def _clean_token(token: str | None) -> str | None:
    """huggingface_hub's _clean_token: line breaks removed, the ends stripped, None for nothing left."""
    return None if token is None else (token.replace("\r", "").replace("\n", "").strip() or None)


def _plain_saved_token(token_path: str, stored_tokens_path: str) -> str | None:
    """The token file's token where get_token would return it as it is read: no stored token of that value
    carries an OAuth refresh token and its expiry (such a token may be refreshed first: get_token's work). None
    where get_token has more to do or to say (no file, an unreadable one, an OAuth token, a stored-tokens file it
    would report as broken): the caller then asks get_token itself."""
    try:
        with open(token_path, encoding="utf-8") as saved:
            token = _clean_token(saved.read())
        if token is None:
            return None
        if not os.path.exists(stored_tokens_path):
            return token
    except (OSError, ValueError):  # ValueError: UnicodeDecodeError, a NUL in a path
        return None
    import configparser  # only where a stored-tokens file is read: most users have none

    try:
        stored = configparser.ConfigParser(interpolation=None)
        stored.read(stored_tokens_path, encoding="utf-8")
    except (OSError, ValueError, configparser.Error):
        return None
    refreshable = any(
        stored.get(name, "hf_token", fallback=None) == token
        and stored.has_option(name, "refresh_token")
        and stored.has_option(name, "expires_at")
        for name in stored.sections()
    )
    return None if refreshable else token


def _in_google_colab() -> bool:
    """huggingface_hub's is_google_colab, asked only where Colab's shell is loaded: it looks for "google.colab" in
    the running IPython shell's name, and importing it imports huggingface_hub.utils (its HTTP stack with it)."""
    if "google.colab" not in sys.modules:
        return False
    from huggingface_hub.utils import is_google_colab

    return is_google_colab()


def _exists(path: str) -> bool:
    """Whether there is something at `path` for get_token to read: anything but "no such file", which is the
    one failure get_token takes as "no token" (an unreadable file or a file on the way raises there too)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):  # get_token's read fails as well, and says why
        pass
    return True
