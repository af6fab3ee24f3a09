"""Clients on the local emulators, made without touching ``os.environ``: Pub/Sub topics and
push subscriptions, and GCS buckets."""

from __future__ import annotations

import contextlib
from typing import Any

from triggers.local.services import DEFAULT_PROJECT


def publisher(pubsub_host: str) -> Any:
    """A publisher on the emulator (insecure channel), without touching ``os.environ``."""
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    channel = grpc.insecure_channel(pubsub_host)
    return pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=channel))


def subscriber(pubsub_host: str) -> Any:
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    channel = grpc.insecure_channel(pubsub_host)
    return pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=channel))


def ensure_topic(pubsub_host: str, project: str, topic: str) -> str:
    from google.api_core.exceptions import AlreadyExists

    path = f"projects/{project}/topics/{topic}"
    with contextlib.suppress(AlreadyExists):
        publisher(pubsub_host).create_topic(name=path)
    return path


def ensure_push_subscription(
    pubsub_host: str, project: str, name: str, topic: str, endpoint: str, ack_deadline: int = 60
) -> str:
    """A push subscription to ``endpoint`` (wrapped format, like production)."""
    from google.api_core.exceptions import AlreadyExists

    path = f"projects/{project}/subscriptions/{name}"
    request = {
        "name": path, "topic": f"projects/{project}/topics/{topic}",
        "push_config": {"push_endpoint": endpoint}, "ack_deadline_seconds": ack_deadline,
    }  # fmt: skip
    with contextlib.suppress(AlreadyExists):
        subscriber(pubsub_host).create_subscription(request=request)
    return path


def storage_client(gcs_url: str) -> Any:
    """A google-cloud-storage client on fake-gcs-server (anonymous, no environment change)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        project=DEFAULT_PROJECT,
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcs_url},
    )


def ensure_bucket(gcs_url: str, bucket: str) -> None:
    from google.api_core.exceptions import Conflict

    with contextlib.suppress(Conflict):
        storage_client(gcs_url).create_bucket(bucket)
