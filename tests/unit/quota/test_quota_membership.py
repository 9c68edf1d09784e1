from tessera.domain.quota.membership import MembershipConflict, resolve


def test_disjoint_tenants_each_own_their_namespaces() -> None:
    got = resolve({"a": {"a1", "a2"}, "b": {"b1"}})
    assert got.namespaces_of("a") == ("a1", "a2")
    assert got.namespaces_of("b") == ("b1",)
    assert got.conflicts == ()
    assert got.contested == frozenset()


def test_overlap_is_a_conflict_naming_both_tenants_and_the_namespaces() -> None:
    got = resolve({"b": {"shared", "x", "b1"}, "a": {"shared", "x", "a1"}})
    assert got.conflicts == (MembershipConflict(("a", "b"), ("shared", "x")),)
    assert got.namespaces_of("a") == ("a1",)
    assert got.namespaces_of("b") == ("b1",)
    assert got.contested == {"shared", "x"}
    message = got.conflicts[0].message
    assert "a and b" in message and "shared, x" in message


def test_three_tenants_on_one_namespace_give_every_pair() -> None:
    got = resolve({"a": {"n"}, "b": {"n"}, "c": {"n", "c1"}})
    assert [c.tenants for c in got.conflicts] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert [c.tenants for c in got.conflicts_of("c")] == [("a", "c"), ("b", "c")]
    assert got.owner == {"c1": "c"}


def test_long_conflict_messages_are_bounded() -> None:
    many = {f"ns-{i:02}" for i in range(12)}
    message = resolve({"a": many, "b": many}).conflicts[0].message
    assert "ns-04" in message and "ns-05" not in message and "and 7 more" in message


def test_tenant_matching_nothing_has_no_namespaces() -> None:
    assert resolve({"a": set()}).namespaces_of("a") == ()
