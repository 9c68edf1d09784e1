"""What the adapter's callers branch on: ``ApiError`` (the HTTP status of a failure) and
``path_of`` (the URL path of a collection or object). No client here, so they import cheaply."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

Obj = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, reason: str, message: str, body: Obj | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def too_many_requests(self) -> bool:
        return self.status == 429


def api_error(status: int, reason: str, raw: Any) -> ApiError:
    try:
        body = json.loads(raw) if raw else {}
    except (TypeError, ValueError):
        body = {"message": str(raw)}
    return ApiError(status, str(body.get("reason") or reason), str(body.get("message", "")), body)


def path_of(api_version: str, plural: str, name: str = "", namespace: str = "") -> str:
    """URL path of a collection or object: ``path_of("v1", "nodes", "gpu-1")``."""
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    ns = f"/namespaces/{quote(namespace)}" if namespace else ""
    obj = f"/{quote(name)}" if name else ""
    return f"{prefix}{ns}/{plural}{obj}"
