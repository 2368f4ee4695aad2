"""Options shared by the topic examples: where the proxy is (``--host``/``--port``, or
``SHARDGATE_HOST``/``SHARDGATE_PORT``; default `make run`'s 127.0.0.1:15306), and the keyspace
and topic they share."""

from __future__ import annotations

import argparse
import os

TOPIC = "order_events"


def topic_ddl(topic: str) -> str:
    return (f"CREATE TOPIC IF NOT EXISTS `{topic}` (order_id BIGINT, customer_id BIGINT, KEY (order_id))"
            " WITH (ttl_seconds = 86400)")


def arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=os.environ.get("SHARDGATE_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("SHARDGATE_PORT", "15306")))
    parser.add_argument("--user", default=os.environ.get("SHARDGATE_USER", "root"))
    parser.add_argument("--password", default=os.environ.get("SHARDGATE_PASSWORD", ""))
    parser.add_argument("--keyspace", default="commerce")
    parser.add_argument("--topic", default=TOPIC)
    return parser
