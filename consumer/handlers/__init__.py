"""Built-in handlers. Each feature module registers its own routes here."""

from __future__ import annotations

from consumer.registry import Registry


def register_builtins(registry: Registry) -> None:
    from consumer import deploy
    from consumer.handlers import cleanup
    from consumer.jobs import tick as jobs_tick
    from consumer.storage import handler as storage

    cleanup.register(registry)
    jobs_tick.register(registry)
    deploy.register(registry)
    storage.register(registry)
