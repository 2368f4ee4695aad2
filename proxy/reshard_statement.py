"""``RESHARD`` statements: the Reshard workflow's verbs as SQL, the twins of the
``shardgate reshard`` subcommands (proxy/resharding/commands.py runs both), for those who
drive a cluster from a SQL client. Vitess has these verbs only in vtctldclient; the
statement names them as its ``Reshard`` command does::

    RESHARD ks.workflow CREATE SOURCE_SHARDS = '-80' TARGET_SHARDS = '-40,40-80'
    RESHARD ks.workflow STATUS | VDIFF | COMPLETE | CANCEL
    RESHARD ks.workflow SWITCHTRAFFIC [READS_ONLY | WRITES_ONLY] [TIMEOUT = <seconds>]
    RESHARD ks.workflow REVERSETRAFFIC [READS_ONLY | WRITES_ONLY] [TIMEOUT = <seconds>]

The answer is the command's text, one row per line (``CREATE`` returns once the workflow is
stored; the copy runs in the ``shardgate up``/``serve`` process, ``STATUS`` follows it).
"""

from __future__ import annotations

import argparse
import io
import re

import pymysql

from proxy.config import ClusterConfig
from proxy.engine.result import Result, local_result
from proxy.errors import ER_PARSE_ERROR, ER_UNKNOWN_ERROR, ProxyError
from proxy.resharding.commands import run_command

_RESHARD = re.compile(
    r"^reshard\s+`?(?P<keyspace>[\w-]+)`?\s*\.\s*`?(?P<workflow>[\w-]+)`?\s+(?P<verb>\w+)(?P<rest>.*?)\s*;?\s*$",
    re.I | re.S,
)
_VERBS = {
    "create": "create", "status": "status", "vdiff": "vdiff", "switchtraffic": "switch-traffic",
    "reversetraffic": "reverse-traffic", "complete": "complete", "cancel": "cancel",
}  # fmt: skip
# Verbs that change what the cluster serves: only for vschema_ddl_authorized_users.
CHANGING_VERBS = frozenset({"create", "switch-traffic", "reverse-traffic", "complete", "cancel"})
_OPTION = re.compile(r"\s*(?P<name>\w+)(?:\s*=\s*(?:'(?P<quoted>[^']*)'|(?P<bare>[\w.,-]+)))?", re.S)
_OPTIONS = {
    "create": {"source_shards", "target_shards"},
    "switch-traffic": {"reads_only", "writes_only", "timeout"},
    "reverse-traffic": {"reads_only", "writes_only", "timeout"},
}
_SYNTAX = (
    "syntax error: expected RESHARD <keyspace>.<workflow> CREATE SOURCE_SHARDS = '<shards>' TARGET_SHARDS = "
    "'<shards>' | STATUS | VDIFF | SWITCHTRAFFIC [READS_ONLY|WRITES_ONLY] | REVERSETRAFFIC [READS_ONLY|WRITES_ONLY]"
    " | COMPLETE | CANCEL"
)


def is_reshard(sql: str) -> bool:
    return _RESHARD.match(sql) is not None


def parse_reshard(sql: str) -> argparse.Namespace:
    """The statement as the arguments ``shardgate reshard`` parses (1064 when malformed)."""
    m = _RESHARD.match(sql)
    verb = _VERBS.get(m.group("verb").lower()) if m else None
    if m is None or verb is None:
        raise ProxyError(ER_PARSE_ERROR, _SYNTAX)
    options: dict[str, str | None] = {}
    rest = m.group("rest")
    pos = 0
    while rest[pos:].strip():
        om = _OPTION.match(rest, pos)
        name = om.group("name").lower() if om else ""
        if om is None or name not in _OPTIONS.get(verb, set()) or name in options:
            raise ProxyError(ER_PARSE_ERROR, f"{_SYNTAX}; near '{rest[pos:].strip()[:40]}'")
        options[name] = om.group("quoted") if om.group("quoted") is not None else om.group("bare")
        pos = om.end()
    seconds = options.get("timeout")
    try:
        timeout = float(seconds) if seconds else None
    except ValueError as e:
        raise ProxyError(ER_PARSE_ERROR, f"{_SYNTAX}; TIMEOUT takes a number of seconds") from e
    if verb == "create" and not (options.get("source_shards") and options.get("target_shards")):
        raise ProxyError(ER_PARSE_ERROR, f"{_SYNTAX}; CREATE needs SOURCE_SHARDS and TARGET_SHARDS")
    return argparse.Namespace(
        keyspace=m.group("keyspace"),
        workflow=m.group("workflow"),
        verb=verb,
        source_shards=options.get("source_shards") or "",
        target_shards=options.get("target_shards") or "",
        no_wait=True,  # the copy runs in the serving process; STATUS follows it
        timeout=timeout,
        json=False,
        reads_only="reads_only" in options,
        writes_only="writes_only" in options,
    )


async def run_reshard(config: ClusterConfig, args: argparse.Namespace) -> Result:
    """Run a parsed RESHARD statement; its text as rows of one column."""
    out = io.StringIO()
    try:
        await run_command(config, args, out)
    except (pymysql.MySQLError, OSError) as e:  # a shard the command reads directly is down
        raise ProxyError(ER_UNKNOWN_ERROR, f"reshard {args.workflow}: a shard is unavailable: {e}") from e
    return local_result(["Result"], [(line,) for line in out.getvalue().splitlines()])


__all__ = ["CHANGING_VERBS", "is_reshard", "parse_reshard", "run_reshard"]
