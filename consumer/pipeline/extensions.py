"""The named tables a ``Registry`` is made of: job kinds, file processors, cache warmers, routes.

Generic on purpose: the core keeps what plugins register without importing the features that
use it (the sweep reads job kinds, the storage handler processors, the deploy handler warmers).
A name is registered once; a second registration is a mistake unless it says ``replace=True``,
so two plugins that pick the same name fail at start instead of one silently losing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from consumer.errors import AlreadyRegistered

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class Named(Generic[T]):
    """Items by name, in registration order. ``what`` names the table in error messages."""

    def __init__(self, what: str = "name") -> None:
        self.what = what
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T, *, replace: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.what} needs a name")
        if name in self._items and not replace:
            raise AlreadyRegistered(
                f"{self.what} {name!r} is already registered (pass replace=True to replace it)"
            )
        self._items[name] = item

    def remove(self, name: str) -> None:
        self._items.pop(name, None)

    def get(self, name: str) -> T | None:
        return self._items.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._items))

    def values(self) -> list[T]:
        return list(self._items.values())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class Functions(Named[Callable[..., Any]]):
    """Named functions with a decorator: ``@registry.job_kinds.kind("email")``."""

    def kind(self, name: str, *, replace: bool = False) -> Callable[[F], F]:
        def register(function: F) -> F:
            self.add(name, function, replace=replace)
            return function

        return register

    register = kind
    """The same decorator under the name processors used: ``@processors.register("x")``."""


class JobKinds(Functions):
    """Job kinds the sweep runs (``registry.job_kinds``): name -> the function that performs one
    job."""

    def __init__(self) -> None:
        super().__init__("job kind")


class Processors(Functions):
    """File processors a storage rule may name (``registry.processors``), by name."""

    def __init__(self) -> None:
        super().__init__("file processor")


@dataclass(frozen=True)
class WarmerSpec:
    """A cache warmer and the services whose deploys it warms (empty: every service)."""

    name: str
    warmer: Callable[..., Any]
    services: frozenset[str] = frozenset()

    def applies_to(self, service: str) -> bool:
        return not self.services or service in self.services


class Warmers(Named[WarmerSpec]):
    """Cache warmers, run in registration order for each deploy they apply to."""

    def __init__(self) -> None:
        super().__init__("cache warmer")

    def add(
        self,
        name: str,
        item: WarmerSpec | Callable[..., Any],
        services: Collection[str] = (),
        *,
        replace: bool = False,
    ) -> None:
        """Add a warmer function (or a ready ``WarmerSpec``) for ``services`` (empty: all)."""
        spec = item if isinstance(item, WarmerSpec) else WarmerSpec(name, item, frozenset(services))
        super().add(name, spec, replace=replace)

    def warmer(
        self, name: str, services: Collection[str] = (), *, replace: bool = False
    ) -> Callable[[F], F]:
        def register(warmer: F) -> F:
            self.add(name, warmer, services, replace=replace)
            return warmer

        return register

    def for_service(self, service: str) -> list[WarmerSpec]:
        return [spec for spec in self.values() if spec.applies_to(service)]
