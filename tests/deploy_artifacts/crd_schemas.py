"""JSON schemas for the GKE custom resources we use, which kubernetes-validate does not ship.
They cover the fields GKE documents for BackendConfig (cloud.google.com/v1),
ManagedCertificate (networking.gke.io/v1), and Managed Service for Prometheus' PodMonitoring and
Rules (monitoring.googleapis.com/v1, after the CRDs Google publishes), and reject unknown ones,
as ``--strict`` does."""

from __future__ import annotations

from typing import Any

_INT = {"type": "integer", "minimum": 0}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "additionalProperties": False,
}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _object(
        {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": spec,
        },
        required=("apiVersion", "kind", "metadata", "spec"),
    )


BACKEND_CONFIG = _resource(
    "cloud.google.com/v1",
    "BackendConfig",
    _object(
        {
            "timeoutSec": {"type": "integer", "minimum": 1, "maximum": 2147483647},
            "connectionDraining": _object({"drainingTimeoutSec": _INT}),
            "healthCheck": _object(
                {
                    "checkIntervalSec": _INT,
                    "timeoutSec": _INT,
                    "healthyThreshold": _INT,
                    "unhealthyThreshold": _INT,
                    "type": {"enum": ["HTTP", "HTTPS", "HTTP2"]},
                    "requestPath": {"type": "string", "pattern": "^/"},
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                }
            ),
            "sessionAffinity": {"type": "object"},
            "securityPolicy": {"type": "object"},
            "logging": {"type": "object"},
            "cdn": {"type": "object"},
            "iap": {"type": "object"},
            "customRequestHeaders": {"type": "object"},
            "customResponseHeaders": {"type": "object"},
        }
    ),
)

MANAGED_CERTIFICATE = _resource(
    "networking.gke.io/v1",
    "ManagedCertificate",
    _object(
        {
            "domains": {
                "type": "array",
                "minItems": 1,
                "maxItems": 100,
                # No wildcards: Google-managed certificates do not support them.
                "items": {"type": "string", "pattern": r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$"},
            }
        },
        required=("domains",),
    ),
)

_DURATION = {"type": "string", "pattern": r"^((\d+)(ms|s|m|h|d|w|y))+$|^0$"}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_SCRAPE_ENDPOINT = _object(
    {
        "port": {"oneOf": [{"type": "string", "minLength": 1}, {"type": "integer"}]},
        "path": {"type": "string", "pattern": "^/"},
        "scheme": {"enum": ["http", "https"]},
        "interval": _DURATION,
        "timeout": _DURATION,
        "params": {"type": "object"},
        "proxyUrl": {"type": "string"},
        "metricRelabeling": {"type": "array", "items": {"type": "object"}},
        "authorization": {"type": "object"},
        "basicAuth": {"type": "object"},
        "oauth2": {"type": "object"},
        "tls": {"type": "object"},
    },
    required=("port",),
)
_METADATA_LABELS = ["pod", "container", "node", "top_level_controller_name",
                    "top_level_controller_type"]  # fmt: skip

POD_MONITORING = _resource(
    "monitoring.googleapis.com/v1",
    "PodMonitoring",
    _object(
        {
            "selector": _object(
                {"matchLabels": _STRING_MAP, "matchExpressions": {"type": "array"}}
            ),
            "endpoints": {"type": "array", "minItems": 1, "items": _SCRAPE_ENDPOINT},
            "targetLabels": _object(
                {
                    "fromPod": {"type": "array", "items": {"type": "object"}},
                    "metadata": {"type": "array", "items": {"enum": _METADATA_LABELS}},
                }
            ),
            "limits": {"type": "object"},
            "filterRunning": {"type": "boolean"},
        },
        required=("selector", "endpoints"),
    ),
)

_RULE = {
    **_object(
        {
            "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            "record": {"type": "string"},
            "expr": {"type": "string", "minLength": 1},
            "for": _DURATION,
            "labels": _STRING_MAP,
            "annotations": _STRING_MAP,
        },
        required=("expr",),
    ),
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
}
RULES = _resource(
    "monitoring.googleapis.com/v1",
    "Rules",
    _object(
        {
            "groups": {
                "type": "array",
                "minItems": 1,
                "items": _object(
                    {
                        "name": {"type": "string", "minLength": 1},
                        "interval": _DURATION,
                        "rules": {"type": "array", "minItems": 1, "items": _RULE},
                    },
                    required=("name", "interval", "rules"),
                ),
            }
        },
        required=("groups",),
    ),
)

CRD_SCHEMAS = {
    ("cloud.google.com/v1", "BackendConfig"): BACKEND_CONFIG,
    ("networking.gke.io/v1", "ManagedCertificate"): MANAGED_CERTIFICATE,
    ("monitoring.googleapis.com/v1", "PodMonitoring"): POD_MONITORING,
    ("monitoring.googleapis.com/v1", "Rules"): RULES,
}
