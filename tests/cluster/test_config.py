"""Loading the cluster YAML (issue 2, "Cluster configuration")."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from proxy.config import ConfigError, ShardEndpoint, TlsConfig, load_config
from proxy.executor import vschema_ddl_authorized
from tests.conftest import EXAMPLE_CLUSTER_YAML

UNSHARDED_VSCHEMA = '{"sharded": false, "tables": {"t": {}}}'
SHARDED_VSCHEMA = '{"sharded": true, "vindexes": {"hash": {"type": "hash"}}, "tables": {}}'


def write_cluster(directory: Path, yaml_text: str, files: dict[str, str] | None = None) -> Path:
    """A cluster YAML (and the files it names) in `directory`; returns the YAML path."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in (files or {}).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(content)
    path = directory / "cluster.yaml"
    path.write_text(textwrap.dedent(yaml_text))
    return path


MINIMAL = textwrap.dedent(
    """\
    users: [{user: root, password: ""}]
    local: {data_dir: data, base_port: 17100}
    keyspaces:
      ks:
        vschema: ks.json
        shards: ["0"]
    """
)


def test_example_cluster_has_the_documented_listener_users_and_local_section() -> None:
    config = load_config(EXAMPLE_CLUSTER_YAML)
    assert (config.listen.host, config.listen.port, config.listen.tls) == ("127.0.0.1", 15306, None)
    assert [(u.user, u.password) for u in config.users] == [("root", "")]
    assert config.local is not None
    assert config.local.base_port == 17100
    assert config.local.data_dir == EXAMPLE_CLUSTER_YAML.parent / ".shardgate" / "data"
    assert config.routing_rules == {"rules": []}


def test_example_cluster_has_commerce_sharded_and_lookup_unsharded() -> None:
    config = load_config(EXAMPLE_CLUSTER_YAML)
    commerce, lookup = config.keyspaces["commerce"], config.keyspaces["lookup"]
    assert list(config.keyspaces) == ["commerce", "lookup"]
    assert commerce.shards == {"-80": None, "80-": None}
    assert commerce.sharded and commerce.vschema["tables"]["customer"]["column_vindexes"]
    assert lookup.shards == {"0": None}
    assert not lookup.sharded
    assert lookup.vschema["tables"]["customer_seq"] == {"type": "sequence"}
    assert commerce.schema_path == EXAMPLE_CLUSTER_YAML.parent / "commerce_schema.sql"
    assert commerce.vschema_path == EXAMPLE_CLUSTER_YAML.parent / "commerce_vschema.json"


def test_paths_are_relative_to_the_yaml_file_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_cluster(tmp_path / "conf", MINIMAL, {"ks.json": UNSHARDED_VSCHEMA})
    monkeypatch.chdir(tmp_path)
    config = load_config("conf/cluster.yaml")
    assert config.path == path
    assert config.local is not None
    assert config.local.data_dir == tmp_path / "conf" / "data"
    assert config.keyspaces["ks"].vschema_path == tmp_path / "conf" / "ks.json"


def test_listen_defaults_to_loopback_15306_when_omitted(tmp_path: Path) -> None:
    config = load_config(write_cluster(tmp_path, MINIMAL, {"ks.json": UNSHARDED_VSCHEMA}))
    assert (config.listen.host, config.listen.port) == ("127.0.0.1", 15306)


def test_vschema_may_be_written_in_yaml(tmp_path: Path) -> None:
    yaml_text = MINIMAL.replace("ks.json", "ks_vschema.yaml")
    path = write_cluster(
        tmp_path, yaml_text, {"ks_vschema.yaml": "sharded: false\ntables:\n  t: {}\n"}
    )
    assert load_config(path).keyspaces["ks"].vschema == {"sharded": False, "tables": {"t": {}}}


def test_shards_mapping_gives_dsn_endpoints(tmp_path: Path) -> None:
    path = write_cluster(
        tmp_path,
        """\
        users: [{user: app, password: secret}]
        keyspaces:
          ks:
            vschema: ks.json
            shards:
              "-80": "mysql://app:p%40ss@db1.internal:3307/ks_a"
              "80-": "mysql://app@db2.internal"
        """,
        {"ks.json": SHARDED_VSCHEMA},
    )
    config = load_config(path)
    shards = config.keyspaces["ks"].shards
    assert shards["-80"] == ShardEndpoint("db1.internal", 3307, "app", "p@ss", "ks_a")
    # Port and database default to 3306 and the keyspace name.
    assert shards["80-"] == ShardEndpoint("db2.internal", 3306, "app", "", "ks")
    assert config.local is None
    assert not config.has_local_shards


def test_a_dsn_shard_may_name_its_unix_socket(tmp_path: Path) -> None:
    path = write_cluster(
        tmp_path,
        """\
        users: [{user: app}]
        keyspaces:
          ks:
            vschema: ks.json
            shards:
              "-80": {dsn: "mysql://app@db1.internal/ks", socket: /run/mysqld/mysqld.sock}
              "80-": {dsn: "mysql://app@db2.internal/ks"}
        """,
        {"ks.json": SHARDED_VSCHEMA},
    )
    shards = load_config(path).keyspaces["ks"].shards
    assert shards["-80"] == ShardEndpoint(
        "db1.internal", 3306, "app", "", "ks", socket="/run/mysqld/mysqld.sock"
    )
    assert shards["80-"] == ShardEndpoint("db2.internal", 3306, "app", "", "ks")


def test_numeric_shard_name_is_read_as_a_string(tmp_path: Path) -> None:
    path = write_cluster(tmp_path, MINIMAL.replace('["0"]', "[0]"), {"ks.json": UNSHARDED_VSCHEMA})
    assert list(load_config(path).keyspaces["ks"].shards) == ["0"]


def test_overrides_replace_data_dir_base_port_and_listen_port(tmp_path: Path) -> None:
    config = load_config(
        EXAMPLE_CLUSTER_YAML, data_dir=tmp_path / "d", base_port=40000, listen_port=40100
    )
    assert config.local is not None
    assert (config.local.data_dir, config.local.base_port) == (tmp_path / "d", 40000)
    assert (config.listen.host, config.listen.port) == ("127.0.0.1", 40100)


def test_tls_cert_and_key_resolve_relative_to_the_yaml_file(tmp_path: Path) -> None:
    yaml_text = "listen: {port: 3310, tls: {cert: tls/cert.pem, key: tls/key.pem}}\n" + (MINIMAL)
    path = write_cluster(
        tmp_path,
        yaml_text,
        {"ks.json": UNSHARDED_VSCHEMA, "tls/cert.pem": "cert", "tls/key.pem": "key"},
    )
    assert load_config(path).listen.tls == TlsConfig(
        cert=tmp_path / "tls" / "cert.pem", key=tmp_path / "tls" / "key.pem"
    )


def test_routing_rules_are_kept_in_vitess_shape(tmp_path: Path) -> None:
    rules = "routing_rules: {rules: [{from_table: t, to_tables: [ks.t]}]}\n"
    path = write_cluster(tmp_path, rules + MINIMAL, {"ks.json": UNSHARDED_VSCHEMA})
    assert load_config(path).routing_rules == {
        "rules": [{"from_table": "t", "to_tables": ["ks.t"]}]
    }


def test_messaging_binlog_watch_defaults_on_and_can_be_turned_off(tmp_path: Path) -> None:
    on = write_cluster(tmp_path / "on", MINIMAL, {"ks.json": UNSHARDED_VSCHEMA})
    assert load_config(on).messaging.binlog_watch is True
    off = write_cluster(tmp_path / "off", "messaging: {binlog_watch: false}\n" + MINIMAL, {"ks.json": UNSHARDED_VSCHEMA})
    assert load_config(off).messaging.binlog_watch is False


def test_messaging_binlog_watch_must_be_a_boolean(tmp_path: Path) -> None:
    path = write_cluster(tmp_path, "messaging: {binlog_watch: maybe}\n" + MINIMAL, {"ks.json": UNSHARDED_VSCHEMA})
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "messaging.binlog_watch" in str(e.value)


def test_transaction_timeout_defaults_to_no_limit_and_takes_seconds(tmp_path: Path) -> None:
    unset = write_cluster(tmp_path / "unset", MINIMAL, {"ks.json": UNSHARDED_VSCHEMA})
    assert load_config(unset).transaction_timeout == 0.0
    set_ = write_cluster(tmp_path / "set", "transaction_timeout: 2.5\n" + MINIMAL, {"ks.json": UNSHARDED_VSCHEMA})
    assert load_config(set_).transaction_timeout == 2.5


# Each invalid file must be reported with the file path and the dotted name of the bad field.
INVALID_CONFIGS = {
    "missing_vschema_file": (
        MINIMAL.replace("ks.json", "nowhere.json"),
        "keyspaces.ks.vschema",
        "file not found",
    ),
    "listen_port_not_a_number": (
        "listen: {port: fast}\n" + MINIMAL,
        "listen.port",
        "expected a port number",
    ),
    "listen_port_out_of_range": (
        "listen: {port: 70000}\n" + MINIMAL,
        "listen.port",
        "outside 1..65535",
    ),
    "users_missing": (
        MINIMAL.replace('users: [{user: root, password: ""}]\n', ""),
        "users",
        "is required",
    ),
    "user_without_name": (
        MINIMAL.replace("{user: root, ", "{"),
        "users[0].user",
        "is required",
    ),
    "unknown_top_level_field": (
        "listn: {port: 1}\n" + MINIMAL,
        "listn",
        "unknown field",
    ),
    "unknown_keyspace_field": (
        MINIMAL.replace("shards:", "shard:"),
        "keyspaces.ks.shard",
        "unknown field",
    ),
    "shards_missing": (
        MINIMAL.replace('    shards: ["0"]\n', ""),
        "keyspaces.ks.shards",
        "is required",
    ),
    "invalid_dsn_scheme": (
        MINIMAL.replace('["0"]', '{"0": "postgres://u@h/db"}'),
        "keyspaces.ks.shards.0",
        "invalid dsn",
    ),
    "unsharded_keyspace_with_two_shards": (
        MINIMAL.replace('["0"]', '["-80", "80-"]'),
        "keyspaces.ks.shards",
        "exactly one shard",
    ),
    "local_shards_without_local_section": (
        MINIMAL.replace("local: {data_dir: data, base_port: 17100}\n", ""),
        "local",
        "is required",
    ),
    "local_without_base_port": (
        MINIMAL.replace(", base_port: 17100", ""),
        "local.base_port",
        "is required",
    ),
    "duplicate_shard": (
        MINIMAL.replace('["0"]', '["0", "0"]'),
        "keyspaces.ks.shards[1]",
        "duplicate shard",
    ),
    "shard_name_with_slash": (
        MINIMAL.replace('["0"]', '["a/b"]'),
        "keyspaces.ks.shards[0]",
        "invalid shard name",
    ),
    "keyspaces_missing": (
        MINIMAL.split("keyspaces:")[0],
        "keyspaces",
        "is required",
    ),
    "routing_rule_without_to_tables": (
        "routing_rules: {rules: [{from_table: t}]}\n" + MINIMAL,
        "routing_rules.rules[0].to_tables",
        "is required",
    ),
    "transaction_timeout_negative": (
        "transaction_timeout: -1\n" + MINIMAL,
        "transaction_timeout",
        "expected a number of seconds",
    ),
    "shard_socket_relative": (
        MINIMAL.replace('["0"]', '{"0": {dsn: "mysql://u@h/db", socket: "run/mysqld.sock"}}'),
        "keyspaces.ks.shards.0.socket",
        "must be an absolute path",
    ),
    "shard_entry_without_dsn": (
        MINIMAL.replace('["0"]', '{"0": {socket: /run/mysqld/mysqld.sock}}'),
        "keyspaces.ks.shards.0.dsn",
        "is required",
    ),
    "shard_entry_unknown_key": (
        MINIMAL.replace('["0"]', '{"0": {dsn: "mysql://u@h/db", sock: /x.sock}}'),
        "keyspaces.ks.shards.0.sock",
        "unknown field",
    ),
    "shard_transport_unknown": (
        MINIMAL.replace("base_port: 17100}", "base_port: 17100, shard_transport: pipe}"),
        "local.shard_transport",
        "expected one of unix, tcp",
    ),
    "yaml_syntax_error": (
        "listen: {port: 1\n" + MINIMAL,
        "<file>",
        "invalid YAML",
    ),
}


@pytest.mark.parametrize(
    ("yaml_text", "field", "reason"), list(INVALID_CONFIGS.values()), ids=list(INVALID_CONFIGS)
)
def test_invalid_config_error_names_the_file_and_the_field(
    tmp_path: Path, yaml_text: str, field: str, reason: str
) -> None:
    path = write_cluster(tmp_path, yaml_text, {"ks.json": UNSHARDED_VSCHEMA})
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.field == field
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{path}: {field}: ")


def test_unparsable_vschema_json_names_the_keyspace_field(tmp_path: Path) -> None:
    path = write_cluster(tmp_path, MINIMAL, {"ks.json": '{"sharded": tru'})
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.field == "keyspaces.ks.vschema"
    assert "cannot parse ks.json" in caught.value.reason


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "absent.yaml")
    assert caught.value.path == tmp_path / "absent.yaml"
    assert "cannot read" in caught.value.reason


def test_shard_endpoint_repr_hides_the_password() -> None:
    endpoint = ShardEndpoint("127.0.0.1", 3306, "root", "hunter2", "ks")
    assert "hunter2" not in repr(endpoint)
    assert endpoint.dsn == "mysql://root@127.0.0.1:3306/ks"


def test_vschema_ddl_authorized_users_is_nobody_by_default_as_in_vitess(tmp_path: Path) -> None:
    files = {"ks.json": UNSHARDED_VSCHEMA}
    default = load_config(write_cluster(tmp_path / "a", MINIMAL, files)).vschema_ddl_authorized_users
    assert default == frozenset() and not vschema_ddl_authorized(default, "root")
    everyone = load_config(write_cluster(tmp_path / "b", 'vschema_ddl_authorized_users: "%"\n' + MINIMAL, files))
    assert everyone.vschema_ddl_authorized_users is None and vschema_ddl_authorized(None, "anyone")
    listed = load_config(write_cluster(tmp_path / "c", "vschema_ddl_authorized_users: [ops, root]\n" + MINIMAL, files))
    assert listed.vschema_ddl_authorized_users == frozenset({"ops", "root"})
    with pytest.raises(ConfigError, match="vschema_ddl_authorized_users"):
        load_config(write_cluster(tmp_path / "d", "vschema_ddl_authorized_users: 3\n" + MINIMAL, files))
