"""Which source and target shard sets a Reshard workflow accepts (no cluster needed)."""

from __future__ import annotations

import pytest

from proxy.config import ShardEndpoint
from proxy.resharding.lifecycle import ReshardRefused, check_shards
from proxy.resharding.topology import KeyspaceTopology, ShardEndpointSpec
from proxy.resharding.workflow import WorkflowError

STORE = ("lookup", "0")


def topology(*serving: str) -> KeyspaceTopology:
    spec = ShardEndpointSpec(ShardEndpoint("127.0.0.1", 3306, "root", "", "commerce"))
    return KeyspaceTopology("commerce", serving, {s: spec for s in serving})


@pytest.mark.parametrize(
    ("serving", "sources", "targets"),
    [
        (("-80", "80-"), ["-80"], ["-40", "40-80"]),
        (("-80", "80-"), ["80-"], ["80-c0", "c0-"]),
        (("-80", "80-"), ["-80", "80-"], ["-"]),  # merge into one shard
        (("-40", "40-80", "80-"), ["-40", "40-80"], ["-80"]),  # merge back
        (("-80", "80-"), ["-80", "80-"], ["-20", "20-a0", "a0-"]),  # re-split across the old boundary
    ],
)
def test_targets_covering_exactly_the_sources_are_accepted(serving: tuple[str, ...], sources: list[str], targets: list[str]) -> None:
    check_shards("wf", topology(*serving), sources, targets, STORE)


@pytest.mark.parametrize(
    ("sources", "targets", "message"),
    [
        (["-80"], ["-40", "50-80"], "gap between -40 and 50-80"),
        (["-80"], ["-40", "30-80"], "-40 and 30-80 overlap"),
        (["-80"], ["-40", "40-"], "do not cover exactly the key range of source shards -80"),
        (["-80"], ["-40"], "do not cover exactly the key range"),
        (["-40"], ["-20", "20-40"], "source shard commerce/-40 does not serve"),
        (["-80"], ["-80"], "target shard commerce/-80 already exists"),
        (["-80"], ["-4", "4-80"], "bounds must be an even number of hex digits"),
        (["-80", "-80"], ["-40", "40-80"], "a source shard is listed twice"),
        (["-80"], [], "no target shards given"),
    ],
)
def test_bad_shard_sets_are_refused_naming_the_problem(sources: list[str], targets: list[str], message: str) -> None:
    with pytest.raises(WorkflowError) as refused:
        check_shards("wf", topology("-80", "80-"), sources, targets, STORE)
    assert message in refused.value.message
    assert refused.value.message.startswith("workflow wf: ")


def test_an_unsharded_keyspace_going_sharded_is_not_supported_yet() -> None:
    with pytest.raises(ReshardRefused) as refused:
        check_shards("wf", topology("0"), ["0"], ["-80", "80-"], STORE)
    assert refused.value.code == 1235 and refused.value.sqlstate == "42000"
    assert "unsharded" in refused.value.message


def test_a_target_named_like_the_vschema_store_shard_is_refused() -> None:
    with pytest.raises(WorkflowError) as refused:
        check_shards("wf", topology("-40", "40-80", "80-"), ["-40", "40-80"], ["-80"], ("commerce", "-80"))
    assert "vschema store" in refused.value.message
