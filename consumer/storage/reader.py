"""Reading one object generation from GCS: pinned, streamed, checksum verified.

``google-cloud-storage`` honours ``STORAGE_EMULATOR_HOST`` itself (fake-gcs-server locally).
Every request names the event's generation, so an overwrite mid-read cannot mix contents: the
old generation is read whole, or is gone (404) and the file is skipped. The content streams to a
temporary file while its CRC32C (or MD5) is computed; processing starts only once it matches,
so no job is ever made from corrupted bytes, and memory stays flat however large the file.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, BinaryIO, cast

import google_crc32c
import requests
from google.api_core import exceptions as api
from google.auth.exceptions import TransportError
from google.cloud import storage
from google.resumable_media import DataCorruption, InvalidResponse

from consumer.errors import Permanent, Retryable
from consumer.storage.model import StoredObject

TIMEOUT_SECONDS = (10.0, 60.0)
MAX_DECOMPRESSED_BYTES = 4 << 30
"""A gzip-stored object that inflates past this is refused (a 4 MB gzip bomb inflates to 4 GB)."""
GZIP_FAULTS = (gzip.BadGzipFile, EOFError, zlib.error)
TRANSIENT = (
    api.GoogleAPICallError, requests.RequestException, TransportError, InvalidResponse,
    DataCorruption, ConnectionError, TimeoutError,
)  # fmt: skip


class ObjectUnavailable(Exception):
    """The generation cannot be read any more: the object was deleted or overwritten."""


class UnreadableContent(Permanent):
    """The stored bytes cannot be decompressed (corrupt or truncated gzip), or inflate past the
    limit: a retry reads the same bytes, so the file is refused."""


class _Inflated(io.RawIOBase):
    """A gzip stream that refuses to inflate past ``limit`` bytes, reports decompression faults
    as ``UnreadableContent``, and calls ``on_chunk`` per chunk (so the pacer beats)."""

    def __init__(self, gz: gzip.GzipFile, limit: int, on_chunk: Callable[[], None]) -> None:
        self.gz, self.limit, self.on_chunk = gz, limit, on_chunk

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.gz.tell()

    def readinto(self, buffer: Any) -> int:
        with _unreadable():
            size = self.gz.readinto(buffer)
        self.on_chunk()
        if self.gz.tell() > self.limit:
            raise UnreadableContent(f"the content inflates to more than {self.limit} bytes")
        return size

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Forward seeks inflate chunk by chunk, so a resume deep in the file still beats."""
        if whence != io.SEEK_SET or offset < self.gz.tell():
            with _unreadable():
                return self.gz.seek(offset, whence)
        chunk = bytearray(1 << 16)
        while (left := offset - self.gz.tell()) > 0 and self.readinto(memoryview(chunk)[:left]):
            pass
        return self.gz.tell()


@contextmanager
def _unreadable() -> Iterator[None]:
    try:
        yield
    except GZIP_FAULTS as exc:
        raise UnreadableContent(f"the gzip content is unreadable: {exc}") from exc


class ChecksumMismatch(Retryable):
    """The bytes read do not match the object's checksum; a retry reads them again."""


class _Sink:
    """Where the download writes: the spool file, a running checksum, a progress callback."""

    def __init__(self, spool: IO[bytes], on_chunk: Callable[[], None]) -> None:
        self.spool = spool
        self.on_chunk = on_chunk
        self.crc = google_crc32c.Checksum()
        self.md5 = hashlib.md5(usedforsecurity=False)
        self.size = 0

    def write(self, data: bytes) -> int:
        self.spool.write(data)
        self.crc.update(data)
        self.md5.update(data)
        self.size += len(data)
        self.on_chunk()
        return len(data)

    def verify(self, obj: StoredObject) -> str:
        """The checksum that was verified, e.g. ``crc32c:AAAAAA==``; raise on a mismatch."""
        if obj.crc32c:
            kind, expected, actual = "crc32c", obj.crc32c, _b64(self.crc.digest())
        elif obj.md5_hash:
            kind, expected, actual = "md5", obj.md5_hash, _b64(self.md5.digest())
        else:
            return ""
        if actual != expected or (obj.size is not None and self.size != obj.size):
            raise ChecksumMismatch(
                f"{obj.url}: read {self.size} bytes with {kind} {actual}, "
                f"expected {obj.size} bytes with {kind} {expected}"
            )
        return f"{kind}:{actual}"


class ObjectStore:
    """The GCS reads of file processing. The client is made on first use, once per process."""

    def __init__(
        self,
        client_factory: Callable[[], storage.Client] = storage.Client,
        max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
    ) -> None:
        self._client_factory = client_factory
        self.max_decompressed_bytes = max_decompressed_bytes
        self._client: storage.Client | None = None

    @property
    def client(self) -> storage.Client:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def stat(self, bucket: str, name: str, generation: int) -> StoredObject:
        """The metadata of that generation; ``ObjectUnavailable`` if it is gone."""
        with _translated(f"gs://{bucket}/{name}#{generation}"):
            blob = self.client.bucket(bucket).get_blob(name, generation=generation)
            if blob is None:
                raise ObjectUnavailable(self._why_missing(bucket, name, generation))
        return _object(blob)

    @contextmanager
    def spool(
        self, obj: StoredObject, on_chunk: Callable[[], None] = lambda: None
    ) -> Iterator[tuple[BinaryIO, str]]:
        """The verified content in a temporary file at offset 0 (decompressed if stored gzip),
        and the checksum that was verified."""
        with tempfile.TemporaryFile(prefix="consumer-spool-") as spool:
            sink = _Sink(spool, on_chunk)
            blob = self.client.bucket(obj.bucket).blob(obj.name, generation=obj.generation)
            with _translated(obj.url):
                try:
                    blob.download_to_file(
                        sink, raw_download=True, checksum=None, timeout=TIMEOUT_SECONDS
                    )
                except api.NotFound:
                    raise ObjectUnavailable(
                        self._why_missing(obj.bucket, obj.name, obj.generation)
                    ) from None
            checksum = sink.verify(obj)
            spool.seek(0)
            if obj.content_encoding == "gzip":
                with gzip.GzipFile(fileobj=spool, mode="rb") as unzipped:
                    inflated = _Inflated(unzipped, self.max_decompressed_bytes, on_chunk)
                    yield cast(BinaryIO, io.BufferedReader(inflated, 1 << 16)), checksum
            else:
                yield cast(BinaryIO, spool), checksum

    def _why_missing(self, bucket: str, name: str, generation: int) -> str:
        current = self.client.bucket(bucket).get_blob(name)
        if current is None:
            return f"gs://{bucket}/{name} was deleted before generation {generation} was read"
        return (
            f"generation {generation} of gs://{bucket}/{name} was superseded "
            f"by generation {current.generation} before it was read"
        )


@contextmanager
def _translated(what: str) -> Iterator[None]:
    """GCS faults -> our meanings: 403 is permanent (fix IAM, then replay), others transient."""
    try:
        yield
    except (api.Forbidden, api.Unauthorized) as exc:
        raise Permanent(f"not allowed to read {what}: {exc}") from exc
    except TRANSIENT as exc:
        raise Retryable(f"reading {what} failed: {type(exc).__name__}: {exc}") from exc


def _object(blob: Any) -> StoredObject:
    return StoredObject(
        bucket=blob.bucket.name,
        name=blob.name,
        generation=int(blob.generation),
        size=None if blob.size is None else int(blob.size),
        content_type=blob.content_type or "",
        content_encoding=blob.content_encoding or "",
        crc32c=blob.crc32c or "",
        md5_hash=blob.md5_hash or "",
        metageneration=None if blob.metageneration is None else int(blob.metageneration),
    )


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")
