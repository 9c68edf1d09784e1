"""The client's transport failures become ``ApiError`` (status 0), whatever stage they hit."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest
import urllib3
from kubernetes import client

from tessera.adapters.kube import ApiError, Kube, WriteCounter


class _CutResponse:
    """A response whose headers came, and whose body the server cut (it restarted)."""

    status = 200
    reason = "OK"

    def read(self) -> bytes:
        raise urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead(10 bytes)")


class _Api:
    def __init__(self, response: Any) -> None:
        self.response = response

    def param_serialize(self, method: str, path: str, **_: Any) -> tuple[Any, ...]:
        return method, f"https://api{path}", {}, None, None

    def call_api(self, *_: Any, **__: Any) -> Any:
        return self.response


def test_a_body_cut_mid_read_is_a_transient_api_error() -> None:
    kube = Kube(cast(client.ApiClient, _Api(_CutResponse())))
    with pytest.raises(ApiError) as raised:
        kube.list("/api/v1/nodes")
    assert raised.value.status == 0 and raised.value.reason == "TransportError"
    assert "IncompleteRead" in raised.value.message


def test_writes_counted_from_many_threads_are_all_counted() -> None:
    counter = WriteCounter({})
    start = threading.Barrier(16)

    def write() -> None:
        start.wait()
        for _ in range(2000):
            counter.add("patch")

    threads = [threading.Thread(target=write) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.total == 16 * 2000
