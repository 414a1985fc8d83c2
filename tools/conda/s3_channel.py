"""A conda channel held in an S3 bucket (AWS, or any S3 API: R2, MinIO, moto in the tests), as rattler-build's
`upload s3` and rattler-index's S3 indexer lay it out: `s3://<bucket>/<prefix>/<subdir>/<file>`, served to consumers
over HTTP(S) from a public-read bucket.

Only the object operations publishing needs, each one a single S3 request: read an object with its ETag, and write
one whole object, optionally only if it is still the version read (If-Match) or does not exist yet (If-None-Match):
S3's conditional writes, which make the repodata update safe against a concurrent publisher. Every write is checked
against the server's ETag, the MD5 of the bytes it stored (single-part uploads).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


class ChannelStoreError(RuntimeError):
    """The S3 server refused or failed a request; the message says which object and why."""


class Conflict(ChannelStoreError):
    """A conditional write lost: the object changed (or appeared) since it was read."""


@dataclass(frozen=True)
class S3Location:
    """Where the channel lives: bucket and key prefix (no slashes at either end; may be empty)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
            raise ValueError(
                f"channel {url!r} is not an S3 URL; give s3://<bucket>/<path>, e.g. s3://acme-conda/img2gray"
            )
        prefix = parts.path.strip("/")
        if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
            raise ValueError(f"channel {url!r} has an empty, . or .. path segment; give s3://<bucket>/<path>")
        return cls(parts.netloc, prefix)

    def key(self, subdir: str, name: str) -> str:
        return "/".join(part for part in (self.prefix, subdir, name) if part)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class StoredObject:
    body: bytes
    etag: str  # the server's ETag, quotes included, as If-Match wants it back


class S3Channel:
    """The channel's objects through a boto3 S3 client (credentials: boto3's usual chain, AWS_* variables)."""

    def __init__(self, client: Any, location: S3Location) -> None:
        self.client = client
        self.location = location

    @classmethod
    def connect(
        cls, location: S3Location, endpoint_url: str | None = None, region: str | None = None, timeout: float = 60
    ) -> S3Channel:
        import boto3
        from botocore.config import Config

        # Bounded waits: a silent server fails a request after `timeout` seconds (three tries) instead of hanging.
        config = Config(
            connect_timeout=min(timeout, 10), read_timeout=timeout, retries={"max_attempts": 3, "mode": "standard"}
        )
        return cls(boto3.client("s3", endpoint_url=endpoint_url, region_name=region, config=config), location)

    def _fail(self, action: str, key: str, error: Exception) -> ChannelStoreError:
        from botocore.exceptions import ClientError

        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            kind = Conflict if code in ("PreconditionFailed", "ConditionalRequestConflict") or status == 412 else None
            message = f"{action} s3://{self.location.bucket}/{key}: {code or status} ({error})"
            return (kind or ChannelStoreError)(message)
        return ChannelStoreError(f"{action} s3://{self.location.bucket}/{key}: {error}")

    def read(self, key: str) -> StoredObject | None:
        """The object's bytes and ETag, or None when it does not exist."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self.client.get_object(Bucket=self.location.bucket, Key=key)
            return StoredObject(answer["Body"].read(), answer["ETag"])
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._fail("reading", key, error) from error
        except BotoCoreError as error:
            raise self._fail("reading", key, error) from error

    def etag(self, key: str) -> str | None:
        """The object's ETag, or None when it does not exist."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.head_object(Bucket=self.location.bucket, Key=key)["ETag"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._fail("looking up", key, error) from error
        except BotoCoreError as error:
            raise self._fail("looking up", key, error) from error

    def write(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str,
        if_match: str | None = None,
        if_absent: bool = False,
        cache_control: str | None = None,
    ) -> str:
        """Store `body` as one object (readers see the old or the new bytes, never a mix) and return its ETag.
        `if_match`: only over that version; `if_absent`: only where none exists (both raise Conflict otherwise)."""
        from botocore.exceptions import BotoCoreError, ClientError

        options: dict[str, str] = {"ContentType": content_type}
        if if_match is not None:
            options["IfMatch"] = if_match
        if if_absent:
            options["IfNoneMatch"] = "*"
        if cache_control is not None:
            options["CacheControl"] = cache_control
        try:
            answer = self.client.put_object(Bucket=self.location.bucket, Key=key, Body=body, **options)
        except (ClientError, BotoCoreError) as error:
            raise self._fail("writing", key, error) from error
        if answer["ETag"].strip('"') != hashlib.md5(body).hexdigest():  # S3's ETag: the MD5 of what it stored
            raise ChannelStoreError(
                f"writing s3://{self.location.bucket}/{key}: the server stored other bytes than sent "
                f"(ETag {answer['ETag']}); publish again"
            )
        return answer["ETag"]
