"""The route table is the one list of the ways in: the Flask app, the embedded extension, the
gunicorn access-log filter and the OpenAPI document all agree with it."""

from __future__ import annotations

import logging

import yaml
from flask import Flask

from consumer.config.settings import Settings
from consumer.http import openapi
from consumer.http.app import built_with, create_app
from consumer.http.embed import Consumer
from consumer.http.routes import (
    DELIVERIES,
    JOB_API,
    JOB_REPORTS,
    PROBES,
    TABLE,
    access_patterns,
    match,
)
from consumer.observe.logs import SkipDecidedRequests
from consumer.service import Service


def test_the_openapi_document_describes_exactly_the_table() -> None:
    document = yaml.safe_load(openapi.text())
    described = {(path, method.upper()) for path, item in document["paths"].items()
                 for method in item}  # fmt: skip
    table = {(route.path, method) for route in TABLE for method in route.methods - {"HEAD"}}
    assert described == table


def test_flask_serves_only_the_probes_and_the_door_every_delivery(sqlite_url: str) -> None:
    """One implementation per route: no delivery is a Flask view, in the app or mounted."""
    service = Service.of(Settings(database_url=sqlite_url, local_mode=True))
    app = create_app(service)
    rules = {rule.rule for rule in app.url_map.iter_rules()} - {"/static/<path:filename>"}
    assert rules == {route.path for route in PROBES}
    host = Flask("host")
    Consumer(host, service, url_prefix="/consumer")
    assert not any("consumer" in rule.rule for rule in host.url_map.iter_rules())
    plain, mounted = built_with(app), built_with(host)
    assert plain is not None and mounted is not None
    assert plain.gated.gate.routes == TABLE
    assert mounted.gated.gate.routes == DELIVERIES + JOB_API + JOB_REPORTS  # a target reports too


def test_the_access_log_filter_knows_every_row() -> None:
    """It used to list /push and /hooks/deploy and miss /ticks/<task>."""
    skip = SkipDecidedRequests(**access_patterns())

    def kept(method: str, path: str, status: str = "200") -> bool:
        atoms = {"m": method, "U": path, "s": status}
        record = logging.LogRecord("gunicorn.access", 20, __file__, 1, "", (atoms,), None)
        return skip.filter(record)

    for route in DELIVERIES:
        path = route.path.replace("{task}", "sweep")
        assert match(TABLE, path) is not None and not kept("POST", path)
    assert kept("POST", "/ticks/sweep/", "404") and kept("GET", "/push", "405")
    assert not kept("GET", "/healthz") and kept("GET", "/readyz", "503")
