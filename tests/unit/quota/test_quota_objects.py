import pytest
from quota_builders import GPU, MIG, rq

from tessera.api.constants import MANAGED_BY_LABEL, TENANT_QUOTA_LABEL
from tessera.domain.quota import objects
from tessera.domain.quota.quantities import CountError


def test_manifest_is_named_labelled_and_uses_requests_keys() -> None:
    body = objects.manifest("team-a", "ns1", {MIG: 4, GPU: 2000})
    assert body["metadata"] == {
        "name": "tessera-team-a",
        "namespace": "ns1",
        "labels": {MANAGED_BY_LABEL: "tessera", TENANT_QUOTA_LABEL: "team-a"},
    }
    assert body["spec"] == {"hard": {f"requests.{GPU}": "2000", f"requests.{MIG}": "4"}}


def test_read_parses_spec_status_and_canonical_quantities() -> None:
    body = rq(
        "ns1",
        hard={f"requests.{GPU}": "2k"},
        status={"hard": {f"requests.{GPU}": "2k"}, "used": {f"requests.{GPU}": "3"}},
    )
    got = objects.read(body)
    assert got is not None
    assert (got.namespace, got.tenant, got.resource_version) == ("ns1", "team-a", "42")
    assert got.hard == {GPU: 2000} and got.used == {GPU: 3} and got.confirmed


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(rq("ns1", labels={}), id="no-labels"),
        pytest.param(rq("ns1", labels={TENANT_QUOTA_LABEL: "team-a"}), id="no-managed-by"),
        pytest.param(
            rq("ns1", labels={MANAGED_BY_LABEL: "someone", TENANT_QUOTA_LABEL: "team-a"}),
            id="managed-by-someone-else",
        ),
        pytest.param(rq("ns1", labels={MANAGED_BY_LABEL: "tessera"}), id="no-tenant"),
        pytest.param(rq("ns1", name="team-a-gpus"), id="labels-copied-onto-other-name"),
    ],
)
def test_quotas_tessera_did_not_create_are_not_read_as_its_own(body: dict) -> None:
    assert objects.read(body) is None


def test_stray_keys_and_lagging_status_are_seen() -> None:
    got = objects.read(rq("ns1", hard={"pods": "10", f"requests.{GPU}": "2"}, status={"hard": {}}))
    assert got is not None
    assert got.stray == ("pods",) and got.hard == {GPU: 2} and not got.confirmed


def test_garbage_in_status_is_a_clear_error() -> None:
    with pytest.raises(CountError, match=r"ResourceQuota ns1/tessera-team-a status\.used"):
        objects.read(rq("ns1", status={"used": {f"requests.{GPU}": "500m"}}))


def test_selector_lists_every_tessera_quota() -> None:
    assert objects.selector() == f"{MANAGED_BY_LABEL}=tessera,{TENANT_QUOTA_LABEL}"
