"""How a settings section is declared: a frozen dataclass subclassing ``Section`` whose fields
are ``setting(...)`` calls, each carrying its own converter, range, variable name and secrecy.

A section names its variables ``CONSUMER_<prefix><FIELD>`` unless a field says ``env=`` (kept for
variables older than their section, such as ``CONSUMER_MAIL_FROM`` in the SMTP section).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from consumer.config.parse import text

PREFIX = "CONSUMER_"
Rule = tuple[bool, str]
Convert = Callable[[str], Any]


def setting(
    default: Any = None,
    *,
    convert: Convert = text,
    within: tuple[int, int] | None = None,
    env: str = "",
    secret: bool = False,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """A field of a section. ``within``: inclusive range of a whole number; ``secret``: never
    shown in a repr; ``factory`` instead of ``default`` for a mutable value."""
    metadata = {"convert": convert, "within": within, "env": env, "secret": secret}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


class Section:
    """Base of every settings section (built-in or a plugin's). Subclasses are
    ``@dataclass(frozen=True, repr=False)`` and set ``prefix``; ``checks`` adds their own rules."""

    prefix: ClassVar[str] = ""

    def checks(self) -> list[Rule]:
        """Checks beyond the ranges declared on the fields: ``(ok, message)`` pairs."""
        return []

    def problems(self) -> list[str]:
        """Every range and rule this section fails, each naming its variable."""
        ranges = [
            (
                low <= getattr(self, spec.name) <= high,
                f"{variable_of(self, spec)} must be {low}..{high}",
            )
            for spec, (low, high) in ranged_fields(type(self))
        ]
        return [message for ok, message in (*ranges, *self.checks()) if not ok]

    def __repr__(self) -> str:
        """Every field, but a secret that is set shows as ``[redacted]``."""
        shown = []
        for spec in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, spec.name)
            if spec.metadata.get("secret") and value:
                value = "[redacted]"
            shown.append(f"{spec.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


def variables(section: type[Any]) -> dict[str, dataclasses.Field[Any]]:
    """``CONSUMER_*`` variable -> field, for every ``setting`` of ``section``."""
    return {variable_of(section, spec): spec for spec in settings_of(section)}


def variable_of(section: Any, spec: dataclasses.Field[Any]) -> str:
    suffix = spec.metadata.get("env") or f"{section.prefix}{spec.name.upper()}"
    return f"{PREFIX}{suffix}"


def settings_of(section: type[Any]) -> list[dataclasses.Field[Any]]:
    """The fields of ``section`` read from the environment (not the nested sections)."""
    return [spec for spec in dataclasses.fields(section) if "convert" in spec.metadata]


def ranged_fields(section: type[Any]) -> list[tuple[dataclasses.Field[Any], tuple[int, int]]]:
    return [(s, s.metadata["within"]) for s in settings_of(section) if s.metadata["within"]]


def named(variable: str, problem: str | None) -> Rule:
    """A rule from a ``*_problem`` function's answer, prefixed with the variable."""
    return (problem is None, f"{variable}: {problem}")
