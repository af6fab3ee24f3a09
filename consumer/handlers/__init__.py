"""Built-in handlers. Each feature module registers its own routes here."""

from __future__ import annotations

from consumer.registry import Registry


def register_builtins(registry: Registry) -> None:
    from consumer import deploy
    from consumer.handlers import cleanup

    cleanup.register(registry)
    deploy.register(registry)
