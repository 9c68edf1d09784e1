"""The one place Tessera speaks HTTP to the Kubernetes API.

We use the official client for what it is good at — kubeconfig and in-cluster
credentials, TLS, token refresh — but skip its model classes: objects travel
as plain JSON dicts, which is what the domain reads and several times faster
to decode for thousands of Nodes. Every failure becomes an ``ApiError`` with
the HTTP status, so callers branch on 404/409/429 instead of parsing text.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import urllib3
from kubernetes import client, config

from tessera.adapters.api_errors import ApiError, Obj, api_error, path_of
from tessera.adapters.writes import WriteCounter, WriteWatcher

__all__ = [
    "FIELD_MANAGER",
    "ApiError",
    "Kube",
    "Obj",
    "PatchType",
    "WriteCounter",
    "WriteWatcher",
    "path_of",
]

PatchType = Literal["merge", "json", "strategic", "apply"]
_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
FIELD_MANAGER = "tessera"
CONNECTIONS = 32
"""Open connections to the API server kept for reuse (writes and lists go out 16 at a time)."""


class Kube:
    """A thin JSON client: ``get``, ``list``, ``create``, ``patch``, ``delete`` by URL path."""

    def __init__(
        self, api_client: client.ApiClient, on_write: Callable[[str], None] | None = None
    ) -> None:
        self._api = api_client
        self.writes = WriteCounter({}, on_write)
        self._watchers: list[WriteWatcher] = []

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, on_write: Callable[[str], None] | None = None
    ) -> Kube:
        """Load ``path`` (or $KUBECONFIG / ~/.kube/config), or the in-cluster service account.
        ``on_write`` hears the verb of every mutating request (create, patch, update, delete)."""
        settings = client.Configuration()
        if path is None:
            try:
                config.load_incluster_config(client_configuration=settings)
                return cls(client.ApiClient(_pooled(settings)), on_write)
            except config.ConfigException:
                pass
        config.load_kube_config(config_file=path, client_configuration=settings)
        return cls(client.ApiClient(_pooled(settings)), on_write)

    @property
    def server(self) -> str:
        host: str = self._api.configuration.host
        return host

    @property
    def ca_file(self) -> str | None:
        """The file of the CA this client trusts (to hand the same server to another identity)."""
        path: str | None = self._api.configuration.ssl_ca_cert
        return path

    def close(self) -> None:
        self._api.close()

    # -- verbs ---------------------------------------------------------------------------------

    def get(self, path: str) -> Obj:
        return self._call("GET", path)

    def get_or_none(self, path: str) -> Obj | None:
        try:
            return self.get(path)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    def list(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> builtins.list[Obj]:
        pages = self.pages(
            path, label_selector=label_selector, field_selector=field_selector, page_size=page_size
        )
        return [item for page in pages for item in page.get("items", [])]

    def pages(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> Iterator[Obj]:
        """A list, one page at a time; the first page's resourceVersion is the whole list's."""
        query: dict[str, str | int] = {"limit": page_size}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        while True:
            page = self._call("GET", path, query=query)
            yield page
            token = page.get("metadata", {}).get("continue")
            if not token:
                return
            query["continue"] = token

    def list_with_version(
        self, path: str, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> tuple[builtins.list[Obj], str]:
        """One unpaginated list and its resourceVersion, the starting point of a watch."""
        query: dict[str, str | int] = {"labelSelector": label_selector} if label_selector else {}
        if field_selector:
            query["fieldSelector"] = field_selector
        page = self._call("GET", path, query=query)
        return page.get("items", []), str(page.get("metadata", {}).get("resourceVersion", ""))

    def create(self, path: str, body: Mapping[str, Any]) -> Obj:
        self.writes.add("create")
        return self._write("POST", path, body=body)

    def patch(self, path: str, body: Any, kind: PatchType = "merge") -> Obj:
        self.writes.add("patch")
        query: dict[str, str | int] = {"fieldManager": FIELD_MANAGER}
        if kind == "apply":
            query["force"] = "true"
        return self._write("PATCH", path, body=body, content_type=_CONTENT_TYPES[kind], query=query)

    def replace(self, path: str, body: Mapping[str, Any]) -> Obj:
        self.writes.add("update")
        return self._write("PUT", path, body=body)

    def watch_writes(self, watcher: WriteWatcher) -> None:
        """``watcher`` hears of every create, patch and update: before it goes out, and what
        came back (the node cache's read-your-writes, ``node_cache``)."""
        self._watchers.append(watcher)

    def _write(self, method: str, path: str, **kw: Any) -> Obj:
        tokens = [(w, w.begin(path)) for w in self._watchers]
        returned: Obj | None = None
        maybe = True  # a write that fails without an answer may have landed all the same
        try:
            returned = self._call(method, path, **kw)
            return returned
        except ApiError as err:
            maybe = err.status == 0 or err.status >= 500
            raise
        finally:
            for watcher, token in tokens:
                watcher.end(token, returned, maybe)

    def delete(self, path: str, body: Mapping[str, Any] | None = None) -> Obj | None:
        self.writes.add("delete")
        try:
            return self._call("DELETE", path, body=body)
        except ApiError as err:
            if err.not_found:
                return None
            raise

    def watch(
        self,
        path: str,
        *,
        resource_version: str = "",
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 60,
    ) -> Iterator[tuple[str, Obj]]:
        """Stream ``(type, object)`` watch events until the server closes the stream.

        Yields ``("ERROR", status)`` when the resource version is too old; the
        caller re-lists (``Informer``). The operator's node watch and pod index run
        on it (its cache of Nodes serves the passes: ``node_cache``), as do the
        simulated node agents; kopf runs its own watches of Tessera's objects.
        """
        query: dict[str, str | int] = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        if resource_version:
            query["resourceVersion"] = resource_version
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        method, url, headers, _, _ = self._api.param_serialize(
            "GET",
            path,
            query_params=list(query.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        try:
            response = self._api.call_api(
                method, url, header_params=headers, _request_timeout=timeout_seconds + 10
            )
        except (client.ApiException, urllib3.exceptions.HTTPError) as exc:
            raise ApiError(0, "TransportError", str(exc)) from None
        raw = response.response
        try:
            if not 200 <= response.status < 300:
                raise api_error(response.status, response.reason or "", raw.read())
            buffer = b""
            for chunk in raw.stream(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        event = json.loads(line)
                        yield event["type"], event["object"]
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(0, "TransportError", str(exc)) from None
        finally:
            raw.release_conn()

    # -- transport -----------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str | int] | None = None,
        content_type: str = "application/json",
    ) -> Obj:
        method, url, headers, body, _ = self._api.param_serialize(
            method,
            path,
            query_params=list((query or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._api.call_api(
                method, url, header_params=headers, body=body, _request_timeout=30
            )
            data = response.read()  # read lazily: a body cut short (a restart) fails here
        except client.ApiException as exc:  # TLS failures surface as ApiException(status=0)
            raise ApiError(exc.status or 0, "TransportError", str(exc.reason)) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # refused, reset, cut, timeout
            raise ApiError(0, "TransportError", str(exc)) from None
        if not 200 <= response.status < 300:
            raise api_error(response.status, response.reason or "", data)
        return json.loads(data) if data else {}


def _pooled(settings: client.Configuration) -> client.Configuration:
    """Keep ``CONNECTIONS`` connections open: the client's default (5 per CPU of the host, 10
    on 2) is fewer than a pass's concurrent writes and lists, and a connection over the pool's
    size is closed after its one request (a TLS handshake each time)."""
    settings.connection_pool_maxsize = CONNECTIONS
    return settings
