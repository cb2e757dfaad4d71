"""``s3://bucket/prefix`` through boto3 (the ``[s3]`` extra), for AWS and S3-compatible stores.

boto3 reads the usual AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``AWS_REGION``...); the endpoint
comes from ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL`` (MinIO,
SeaweedFS, R2). Each object is fetched with ``IfMatch`` on the ETag it was
listed with, so a file replaced during the download is not mixed with the old
one, and its size is checked before it is renamed into place.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from yomiage.errors import (
    MissingExtraError,
    SourceAuthError,
    SourceError,
    SourceNetworkError,
    SourceNotFoundError,
)
from yomiage.sources.manifest import CHUNK
from yomiage.sources.transfer import Listing, RemoteFile
from yomiage.sources.uri import S3Source

_AUTH_CODES = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "403",
    "401",
}
_MISSING_CODES = {"NoSuchBucket", "NoSuchKey", "404"}


def s3_endpoint() -> str | None:
    """``$AWS_ENDPOINT_URL_S3``, else ``$AWS_ENDPOINT_URL``, else None (AWS itself)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def make_client() -> Any:
    """A boto3 S3 client for the environment's endpoint and credentials."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise MissingExtraError("s3:// sources", "s3", "boto3") from exc
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10)
    return boto3.session.Session().client("s3", endpoint_url=s3_endpoint(), config=config)


def _error(exc: Exception, src: S3Source, what: str) -> SourceError:
    """The SourceError for a botocore exception ``exc``."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    source = str(src)
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return SourceAuthError(
            f"{source}: no AWS credentials for {what}; set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)",
            source=source,
        )
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in _AUTH_CODES or status in (401, 403):
            return SourceAuthError(
                f"{source}: access denied for {what} ({code}); check the AWS credentials "
                "and the bucket policy",
                source=source,
            )
        if code in _MISSING_CODES or status == 404:
            return SourceNotFoundError(f"{source}: {code or 'not found'} ({what})", source=source)
        if code in ("PreconditionFailed", "412") or status == 412:
            return SourceNetworkError(
                f"{source}: {what} changed during the download; run again", source=source
            )
        return SourceNetworkError(f"{source}: {code} for {what}", source=source)
    if isinstance(exc, BotoCoreError | OSError):
        endpoint = s3_endpoint() or "AWS S3"
        return SourceNetworkError(
            f"{source}: cannot reach {endpoint} for {what} ({exc}); check the network "
            "and AWS_ENDPOINT_URL_S3",
            source=source,
        )
    return SourceNetworkError(f"{source}: {what} failed ({exc})", source=source)


@dataclass(frozen=True)
class S3Remote:
    """All objects below one prefix, as a snapshot remote; paths are relative to the prefix."""

    client: Any
    src: S3Source

    def listing(self) -> Listing:
        from botocore.exceptions import BotoCoreError, ClientError

        prefix = f"{self.src.prefix}/" if self.src.prefix else ""
        files: list[RemoteFile] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.src.bucket, Prefix=prefix
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    key = str(obj["Key"])
                    if key.endswith("/"):
                        continue  # a "folder" marker
                    files.append(
                        RemoteFile(key[len(prefix) :], size=int(obj["Size"]), etag=str(obj["ETag"]))
                    )
        except (BotoCoreError, ClientError, OSError) as exc:
            raise _error(exc, self.src, "the object list") from exc

        def open_(remote: RemoteFile, offset: int) -> Any:
            return self._open(prefix + remote.path, remote, offset)

        return Listing("", tuple(files), open_)

    @contextmanager
    def _open(
        self, key: str, remote: RemoteFile, offset: int
    ) -> Iterator[tuple[int, Iterator[bytes]]]:
        from botocore.exceptions import BotoCoreError, ClientError

        args: dict[str, Any] = {"Bucket": self.src.bucket, "Key": key}
        if remote.etag:
            args["IfMatch"] = remote.etag
        if offset:
            args["Range"] = f"bytes={offset}-"
        try:
            resp = self.client.get_object(**args)
        except (BotoCoreError, ClientError, OSError) as exc:
            raise _error(exc, self.src, f"object {key}") from exc
        body = resp["Body"]
        ranged = str(resp.get("ContentRange", "")).startswith(f"bytes {offset}-")
        try:
            yield (offset if offset and ranged else 0), self._chunks(body, key)
        finally:
            body.close()

    def _chunks(self, body: Any, key: str) -> Iterator[bytes]:
        from botocore.exceptions import BotoCoreError

        try:
            while block := body.read(CHUNK):
                yield block
        except (BotoCoreError, OSError) as exc:
            raise SourceNetworkError(
                f"{self.src}: the download of {key} broke off ({exc}); run again to resume it",
                source=str(self.src),
            ) from exc
