"""The cluster file's ``http`` and ``topics`` settings."""

from __future__ import annotations

import shutil

import pytest

from proxy.config import ConfigError, load_config
from tests.conftest import EXAMPLE_CLUSTER_YAML, HTTP_LINE


def _cluster(tmp_path, extra: str):
    files = tmp_path / "files"
    shutil.copytree(EXAMPLE_CLUSTER_YAML.parent, files, ignore=shutil.ignore_patterns(".shardgate"))
    path = files / "cluster.yaml"
    # the example's own http line goes: each test says what the file has
    path.write_text(HTTP_LINE.sub("", path.read_text()) + "\n" + extra + "\n")
    return load_config(path)


def test_http_and_topics_settings_are_read(tmp_path):
    config = _cluster(tmp_path, "http: {host: 127.0.0.1, port: 18080}\n"
                                "topics: {poll_seconds: 0.2, purge_seconds: 5, max_poll_bytes: 65536, direct_min_rows: 1}")
    assert (config.http.host, config.http.port) == ("127.0.0.1", 18080)
    assert (config.topics.poll_seconds, config.topics.purge_seconds, config.topics.refresh_seconds) == (0.2, 5.0, 5.0)
    assert config.topics.max_poll_bytes == 65536
    assert config.topics.direct_min_rows == 1


def test_without_http_there_is_no_listener_and_topic_defaults_apply(tmp_path):
    config = _cluster(tmp_path, "")
    assert config.http is None and config.topics.poll_seconds == 0.5
    assert config.topics.max_poll_bytes == 4 * 1024 * 1024
    assert config.topics.direct_min_rows == 8


@pytest.mark.parametrize("extra, field", [
    ("http: {host: 127.0.0.1, port: 99999}", "http.port"),
    ("http: {hots: x}", "http.hots"),
    ("topics: {poll_seconds: 0}", "topics.poll_seconds"),
    ("topics: {purge_seconds: soon}", "topics.purge_seconds"),
    ("topics: {nope: 1}", "topics.nope"),
    ("topics: {max_poll_bytes: 0}", "topics.max_poll_bytes"),
    ("topics: {max_poll_bytes: 1.5}", "topics.max_poll_bytes"),
    ("topics: {direct_min_rows: 0}", "topics.direct_min_rows"),
    ("topics: {direct_min_rows: true}", "topics.direct_min_rows"),
])
def test_bad_http_or_topics_settings_name_the_field(tmp_path, extra, field):
    with pytest.raises(ConfigError) as e:
        _cluster(tmp_path, extra)
    assert e.value.field == field
