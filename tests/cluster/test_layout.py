"""Where local shards live: stable ports, data dirs and replication identities."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from proxy.cluster import cluster_endpoints, plan_local_shards
from proxy.cluster.layout import safe_shard_dirname
from proxy.config import ShardEndpoint, load_config
from tests.conftest import EXAMPLE_CLUSTER_YAML


def test_local_shards_get_consecutive_ports_in_configuration_order(tmp_path: Path) -> None:
    config = load_config(EXAMPLE_CLUSTER_YAML, data_dir=tmp_path, base_port=30000)
    assert [(s.keyspace, s.shard, s.port) for s in plan_local_shards(config)] == [
        ("commerce", "-80", 30000),
        ("commerce", "80-", 30001),
        ("lookup", "0", 30002),
    ]


def test_each_local_shard_has_a_distinct_server_id_and_gtid_domain(tmp_path: Path) -> None:
    specs = plan_local_shards(load_config(EXAMPLE_CLUSTER_YAML, data_dir=tmp_path))
    assert len({s.server_id for s in specs}) == len(specs)
    assert len({s.gtid_domain_id for s in specs}) == len(specs)
    assert all(s.gtid_domain_id > 0 for s in specs)


def test_data_dirs_are_keyspace_then_shard_with_dashes_made_safe(tmp_path: Path) -> None:
    specs = plan_local_shards(load_config(EXAMPLE_CLUSTER_YAML, data_dir=tmp_path))
    assert [s.data_dir for s in specs] == [
        tmp_path / "commerce" / "_80",
        tmp_path / "commerce" / "80_",
        tmp_path / "lookup" / "0",
    ]
    assert safe_shard_dirname("-") == "_"
    assert safe_shard_dirname("40-80") == "40_80"


def test_local_endpoint_is_root_on_loopback_with_the_keyspace_database(tmp_path: Path) -> None:
    config = load_config(EXAMPLE_CLUSTER_YAML, data_dir=tmp_path, base_port=30000)
    assert cluster_endpoints(config)[("lookup", "0")] == ShardEndpoint(
        "127.0.0.1", 30002, "root", "", "lookup", socket=str(tmp_path / "lookup/0/mariadbd.sock")
    )


def test_local_shards_are_reached_over_tcp_when_the_config_says_so(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE_CLUSTER_YAML.parent, tmp_path / "example")
    path = tmp_path / "example" / EXAMPLE_CLUSTER_YAML.name
    doc = yaml.safe_load(path.read_text())
    doc["local"]["shard_transport"] = "tcp"
    path.write_text(yaml.safe_dump(doc))
    config = load_config(path, data_dir=tmp_path / "data", base_port=30000)
    assert config.local is not None and config.local.shard_transport == "tcp"
    endpoints = cluster_endpoints(config)
    assert endpoints[("lookup", "0")] == ShardEndpoint("127.0.0.1", 30002, "root", "", "lookup")
    assert all(e.socket is None for e in endpoints.values())


def test_dsn_shards_keep_their_endpoint_and_take_no_local_port(tmp_path: Path) -> None:
    (tmp_path / "ks.json").write_text('{"sharded": true}')
    (tmp_path / "u.json").write_text('{"sharded": false}')
    (tmp_path / "cluster.yaml").write_text(
        "users: [{user: root}]\n"
        "local: {data_dir: data, base_port: 30000}\n"
        "keyspaces:\n"
        "  remote: {vschema: ks.json, shards: {'-80': 'mysql://u:p@10.0.0.1/r', '80-': "
        "'mysql://u:p@10.0.0.2/r'}}\n"
        "  mine: {vschema: u.json, shards: ['0']}\n"
    )
    config = load_config(tmp_path / "cluster.yaml")
    assert [(s.keyspace, s.shard, s.port) for s in plan_local_shards(config)] == [
        ("mine", "0", 30000)
    ]
    endpoints = cluster_endpoints(config)
    assert endpoints[("remote", "-80")] == ShardEndpoint("10.0.0.1", 3306, "u", "p", "r")
    assert list(endpoints) == [("remote", "-80"), ("remote", "80-"), ("mine", "0")]
