"""The demo's field-report chain: what it applies and how it reports each place."""

from __future__ import annotations

from devcluster import chain


def test_the_chain_is_one_policy_and_two_pods_on_the_soft_pool() -> None:
    policy, good, bad = chain.manifests()
    assert policy["spec"]["nodeSelector"]["matchLabels"]["tessera.io/pool"] == chain.POOL
    assert policy["spec"]["scheduler"]["name"] == "Volcano"
    assert good["metadata"]["annotations"] == {chain.MODE_ANNOTATION: "hami-core"}
    assert "annotations" not in bad["metadata"]
    assert good["spec"] == bad["spec"]


def test_report_fails_on_a_required_check_and_names_what_a_pending_one_waits_for() -> None:
    needs = next(iter(chain.WAITS_FOR))
    ok, pending = chain.Check("a", True, "fine"), chain.Check("b", False, "not yet", needs)
    text, passed = chain.report([ok, pending])
    assert passed is (needs not in chain.REQUIRED)
    if not passed:
        assert "FAILED   b: not yet" in text
    else:
        assert f"pending  b: not yet (waits for {chain.WAITS_FOR[needs]})" in text
    text, passed = chain.report([chain.Check("c", False, "broken")])  # "" is always required
    assert not passed and "FAILED   c: broken" in text
