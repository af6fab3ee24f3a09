"""JSON schemas for the two GKE custom resources we use, which kubernetes-validate does not ship.
They cover the fields GKE documents for BackendConfig (cloud.google.com/v1) and
ManagedCertificate (networking.gke.io/v1), and reject unknown ones, as ``--strict`` does."""

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

CRD_SCHEMAS = {
    ("cloud.google.com/v1", "BackendConfig"): BACKEND_CONFIG,
    ("networking.gke.io/v1", "ManagedCertificate"): MANAGED_CERTIFICATE,
}
