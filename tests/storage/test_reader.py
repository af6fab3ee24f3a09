"""The GCS read against a real fake-gcs-server: pinned to the generation, checksum verified,
gzip-stored objects decompressed, gone generations reported."""

from __future__ import annotations

import dataclasses
import gzip

import pytest

from consumer.storage.handler import StorageHandler
from consumer.storage.model import FileStatus
from consumer.storage.reader import ChecksumMismatch, ObjectStore, ObjectUnavailable
from consumer.wire.outcomes import Kind
from tests.storage.conftest import Harness, email_csv
from triggers.local import stack


def store(harness: Harness) -> ObjectStore:
    return ObjectStore(lambda: stack.storage_client(harness.gcs_url))


@pytest.fixture
def versioned(harness: Harness) -> Harness:
    bucket = stack.storage_client(harness.gcs_url).get_bucket(harness.bucket)
    bucket.versioning_enabled = True
    bucket.patch()
    return harness


def test_the_notified_generation_is_read_not_the_latest(versioned: Harness) -> None:
    first = versioned.upload("a.csv", email_csv(3))
    second = versioned.upload("a.csv", email_csv(5, start=100))
    assert versioned.notify("a.csv", first).details["rows_accepted"] == 3
    assert versioned.notify("a.csv", second).details["rows_accepted"] == 5
    payloads = [job["payload"]["to"] for job in versioned.jobs()]
    assert payloads[:3] == ["user0@example.com", "user1@example.com", "user2@example.com"]
    assert payloads[3] == "user100@example.com"


def test_the_checksum_is_verified(harness: Harness) -> None:
    objects = store(harness)
    generation = harness.upload("a.csv", email_csv(3))
    obj = objects.stat(harness.bucket, "a.csv", generation)
    with objects.spool(obj) as (content, checksum):
        assert content.read() == email_csv(3)
        assert checksum == f"crc32c:{obj.crc32c}"
    wrong = dataclasses.replace(obj, crc32c="AAAAAA==")
    with pytest.raises(ChecksumMismatch, match="expected"), objects.spool(wrong):
        pass
    md5_only = dataclasses.replace(obj, crc32c="")
    with objects.spool(md5_only) as (_, checksum):
        assert checksum == f"md5:{obj.md5_hash}"


def test_gzip_stored_objects_are_checked_raw_and_read_decompressed(harness: Harness) -> None:
    blob = stack.storage_client(harness.gcs_url).bucket(harness.bucket).blob("z.csv")
    blob.content_encoding = "gzip"
    blob.upload_from_string(gzip.compress(email_csv(4)), content_type="text/csv")
    outcome = harness.notify("z.csv", int(blob.generation))
    assert outcome.details["status"] == "done" and outcome.details["rows_accepted"] == 4


def test_gone_generations_say_why(harness: Harness) -> None:
    objects = store(harness)
    first = harness.upload("a.csv", b"one")
    second = harness.upload("a.csv", b"two")
    with pytest.raises(ObjectUnavailable, match=f"superseded by generation {second}"):
        objects.stat(harness.bucket, "a.csv", first)
    obj = objects.stat(harness.bucket, "a.csv", second)
    harness.delete("a.csv")
    with (
        pytest.raises(ObjectUnavailable, match="was deleted before generation"),
        objects.spool(obj),
    ):
        pass


def upload_gzip(harness: Harness, name: str, data: bytes) -> int:
    blob = stack.storage_client(harness.gcs_url).bucket(harness.bucket).blob(name)
    blob.content_encoding = "gzip"
    blob.upload_from_string(data, content_type="text/csv")
    return int(blob.generation)


def test_a_gzip_bomb_is_rejected_once_it_inflates_past_the_limit(harness: Harness) -> None:
    capped = dataclasses.replace(
        harness, handler=StorageHandler(ObjectStore(store(harness)._client_factory, 1 << 20))
    )
    bomb = gzip.compress(email_csv(2) + b"\0" * (50 << 20))  # 50 KB inflating to 50 MB
    generation = upload_gzip(capped, "bomb.csv", bomb)
    outcome = capped.notify("bomb.csv", generation)
    assert outcome.kind is Kind.DONE, outcome.details
    row = capped.file("bomb.csv", generation)
    assert row.status is FileStatus.REJECTED
    assert "inflates to more than 1048576 bytes" in (row.last_error or "")


def test_a_truncated_gzip_is_rejected_not_retried(harness: Harness) -> None:
    truncated = gzip.compress(email_csv(50))[:-30]
    outcome = harness.notify("cut.csv", upload_gzip(harness, "cut.csv", truncated))
    assert outcome.kind is Kind.DONE, outcome.details
    assert outcome.details["status"] == "rejected"
    assert "the gzip content is unreadable" in outcome.details["error"]


def test_a_gzip_stored_object_can_be_resumed_mid_file(harness: Harness) -> None:
    data = email_csv(5000)
    generation = upload_gzip(harness, "r.csv", gzip.compress(data))
    objects = store(harness)
    obj = objects.stat(harness.bucket, "r.csv", generation)
    with objects.spool(obj) as (content, _checksum):
        content.seek(len(data) // 3)
        assert content.read() == data[len(data) // 3 :]
        content.seek(10)
        assert content.readline() == data[10:].split(b"\n", 1)[0] + b"\n"
