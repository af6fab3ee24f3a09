"""Reading Prometheus exposition text in tests: samples by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def total(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        value
        for sample_name, sample_labels, value in samples(text)
        if sample_name == name and all(sample_labels.get(k) == v for k, v in labels.items())
    )


def names(text: str) -> set[str]:
    return {name for name, _, _ in samples(text)}
