"""``shardgate`` command line: ``up`` (local shards + proxy), ``serve`` (proxy over
shards given by DSN) and ``cdc`` (change events as NDJSON)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

logger = logging.getLogger("shardgate")


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


_STANDARD_RECORD_KEYS = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


class KeyValueFormatter(logging.Formatter):
    """The message, then the record's structured fields (``extra=``) as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        message = record.getMessage()
        fields = {
            k: v for k, v in record.__dict__.items() if k not in _STANDARD_RECORD_KEYS and f"{k}=" not in message
        }
        if fields:
            line += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return line


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])


async def _run_until_signal(main: Any) -> None:
    """Run ``main`` (a coroutine) until SIGINT/SIGTERM, then cancel it cleanly."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(main)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        logger.info("shutting down")


def _serve_loop(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a serving process's ``main()`` on the event loop ``proxy.event_loop`` picks."""
    from proxy.event_loop import EVENT_LOOP_ENV, EventLoopError, loop_factory, run

    try:
        factory = loop_factory()
    except EventLoopError as e:
        raise CliError(str(e)) from e
    # The processes this one starts (``--workers``) run on the loop it runs on: one decision
    # (and one fallback warning) for the group.
    os.environ[EVENT_LOOP_ENV] = "asyncio" if factory is None else "uvloop"
    run(main(), factory)


def _load(args: argparse.Namespace) -> Any:
    from proxy.config import ConfigError, load_config
    from proxy.errors import ProxyError
    from proxy.server import check_listen_safety

    overrides: dict[str, Any] = {}
    if getattr(args, "port", None):
        overrides["listen_port"] = args.port
    try:
        config = load_config(Path(args.config), **overrides)
    except ConfigError as e:
        raise CliError(str(e)) from e
    try:
        check_listen_safety(config.listen.host, config.users)
    except ProxyError as e:
        raise CliError(e.message) from e
    return config


def cmd_up(args: argparse.Namespace) -> int:
    from proxy.cluster import ClusterError, LocalCluster
    from proxy.resharding.topology import start_stored_local_shards
    from proxy.server import serve_proxy

    config = _load(args)

    async def main() -> None:
        cluster = LocalCluster(config)
        await cluster.start()
        try:
            await start_stored_local_shards(cluster)  # a reshard's targets, once they exist
            logger.info(
                "cluster ready",
                extra={"shards": [f"{ks}/{s}@{e.port}" for (ks, s), e in sorted(cluster.endpoints.items())]},
            )
            await _serve_with_reshard_host(config, serve_proxy(config, cluster.endpoints, workers=args.workers), cluster)
        finally:
            await cluster.stop()

    try:
        _serve_loop(lambda: _run_until_signal(main()))
    except ClusterError as e:
        raise CliError(str(e)) from e
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from proxy.server import serve_proxy

    config = _load(args)
    endpoints = {}
    for name, ks in config.keyspaces.items():
        for shard, ep in ks.shards.items():
            if ep is None:
                print(
                    f"shardgate serve: shard {name}/{shard} has no dsn; use 'shardgate up' for local shards",
                    file=sys.stderr,
                )
                return 2
            endpoints[(name, shard)] = ep

    _serve_loop(
        lambda: _run_until_signal(_serve_with_reshard_host(config, serve_proxy(config, endpoints, workers=args.workers)))
    )
    return 0


async def _serve_with_reshard_host(config: Any, serving: Any, cluster: Any = None) -> None:
    """Serve the proxy while this process also runs the cluster's Reshard workflows (and, for
    ``up``, the local instances of their new shards); both stop together."""
    from proxy.resharding.host import WorkflowHost

    host = asyncio.create_task(WorkflowHost(config, cluster).run(), name="reshard-host")
    try:
        await serving
    finally:
        host.cancel()
        try:
            await host
        except asyncio.CancelledError:
            pass


def cmd_reshard(args: argparse.Namespace) -> int:
    import pymysql

    from proxy.errors import ProxyError
    from proxy.resharding.commands import run_command

    config = _load(args)
    try:
        return asyncio.run(run_command(config, args))
    except ProxyError as e:
        raise CliError(f"ERROR {e.code} ({e.sqlstate}): {e.message}") from e
    except (pymysql.MySQLError, OSError) as e:  # a shard the command reads directly is down
        raise CliError(f"a shard is unavailable: {e}") from e
    except KeyboardInterrupt:
        return 130


def cmd_worker(args: argparse.Namespace) -> int:
    """One proxy process of a multi-worker ``up``/``serve`` (endpoints from the parent)."""
    from proxy.server import endpoints_from_json, serve_proxy
    from proxy.worker_cpus import pin_from_environment
    from proxy.worker_peers import WorkerSlot

    pin_from_environment()  # before any thread starts: they inherit it
    config = _load(args)
    endpoints = endpoints_from_json(os.environ["SHARDGATE_ENDPOINTS"])
    slot = WorkerSlot.from_environment()  # None: a proxy process on its own
    _serve_loop(lambda: _run_until_signal(serve_proxy(config, endpoints, worker=slot)))
    return 0


def cmd_cdc(args: argparse.Namespace) -> int:
    from proxy.cdc import CdcError, run_cdc

    config = _load(args)
    tables = [t for spec in args.tables for t in spec.split(",") if t]

    async def main() -> Any:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await run_cdc(
            config, tables, args.start, args.format, sys.stdout, stop=stop,
            minimize_skew=args.minimize_skew, max_rows=args.max_rows,
            include_reshard_journal_events=args.include_reshard_journal_events, stop_on_reshard=args.stop_on_reshard,
        )

    try:
        final = asyncio.run(main())
    except CdcError as e:
        raise CliError(str(e)) from e
    sys.stdout.flush()
    if final is None:
        print("resume position: none (stopped during the table copy; start again with --from snapshot)", file=sys.stderr)
    else:
        print(f"resume position: {final.to_json()}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shardgate",
        description="A sharding MySQL-protocol proxy (Vitess-compatible vschema), with messaging and CDC.",
    )
    p.add_argument("--log-level", default=os.environ.get("SHARDGATE_LOG_LEVEL", "INFO"))
    sub = p.add_subparsers(dest="command", required=True)

    up = sub.add_parser(
        "up",
        help="start one local MariaDB per shard (initialised and loaded on first run) and serve the proxy",
        description="Start one mariadbd per local shard of the cluster file (data under local.data_dir; "
        "schema applied on first start), then serve the proxy in the foreground. Ctrl-C/SIGTERM stops both.",
    )
    up.add_argument("-c", "--config", required=True, help="cluster YAML (see examples/local/cluster.yaml)")
    up.add_argument("--port", type=int, help="override listen.port")
    up.add_argument("--workers", type=int, default=1, help="proxy processes sharing the port (SO_REUSEPORT)")
    up.set_defaults(func=cmd_up)

    serve = sub.add_parser(
        "serve",
        help="serve the proxy over shards given by dsn in the cluster file",
        description="Serve the proxy only; every shard in the cluster file must map to a dsn "
        "mysql://user:pw@host:port/db.",
    )
    serve.add_argument("-c", "--config", required=True)
    serve.add_argument("--port", type=int, help="override listen.port")
    serve.add_argument("--workers", type=int, default=1)
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help=argparse.SUPPRESS)
    worker.add_argument("-c", "--config", required=True)
    worker.add_argument("--port", type=int)
    worker.set_defaults(func=cmd_worker)

    cdc = sub.add_parser(
        "cdc",
        help="stream row changes of tables as newline-delimited JSON",
        description="Write change events to stdout; prints the resume position (VGTID) on exit.",
    )
    cdc.add_argument("-c", "--config", required=True)
    cdc.add_argument("--tables", action="append", required=True, help="keyspace.table[,keyspace.table...]")
    cdc.add_argument("--from", dest="start", default="current", help="current | beginning | snapshot (copy the tables first) | <vgtid json> | since=<ts>")
    cdc.add_argument("--format", choices=["debezium", "vstream"], default="debezium")
    cdc.add_argument("--minimize-skew", action="store_true", help="hold shards more than 2 s ahead of the slowest")
    cdc.add_argument("--max-rows", type=int, help="stop after this many row events")
    cdc.add_argument("--include-reshard-journal-events", action="store_true",
                     help="write the JOURNAL event where a resharding switch moves the stream to the new shards")
    cdc.add_argument("--stop-on-reshard", action="store_true", help="end at a resharding switch's journal")
    cdc.set_defaults(func=cmd_cdc)
    _add_reshard_parser(sub)
    return p


def _add_reshard_parser(sub: Any) -> None:
    p = sub.add_parser(
        "reshard",
        help="split or merge a keyspace's shards while it serves (Vitess's Reshard workflow)",
        description="Reshard workflow verbs. The copy and catch-up run in the `shardgate up`/`serve` "
        "process of the same cluster file; these commands create, watch, verify and switch.",
    )
    p.add_argument("-c", "--config", required=True, help="cluster YAML")
    p.add_argument("--workflow", required=True, help="the workflow's name")
    p.add_argument("--keyspace", required=True)
    verbs = p.add_subparsers(dest="verb", required=True)
    create = verbs.add_parser("create", help="start copying the source shards into new target shards")
    create.add_argument("--source-shards", required=True, help="e.g. -80 (comma separated)")
    create.add_argument("--target-shards", required=True, help="e.g. -40,40-80 (exactly the sources' key range)")
    create.add_argument("--no-wait", action="store_true", help="return at once instead of showing the progress")
    create.add_argument("--timeout", type=float, help="stop watching after this many seconds")
    status = verbs.add_parser("status", help="state, rows copied per table, lag per stream")
    status.add_argument("--json", action="store_true")
    vdiff = verbs.add_parser("vdiff", help="compare sources and targets row by row (exit 1 on differences)")
    vdiff.add_argument("--json", action="store_true")
    switch = verbs.add_parser("switch-traffic", help="serve the keyspace from the target shards")
    switch.add_argument("--reads-only", action="store_true",
                        help="only SELECTs outside transactions go to the targets (they see the catch-up's lag)")
    switch.add_argument("--writes-only", action="store_true", help="writes (and reads with them) go to the targets")
    switch.add_argument("--timeout", type=float, help="seconds to wait for the catch-up (default 30)")
    reverse = verbs.add_parser("reverse-traffic", help="serve the keyspace from the source shards again")
    reverse.add_argument("--reads-only", action="store_true", help="only the reads go back")
    reverse.add_argument("--writes-only", action="store_true", help="writes (and reads with them) go back")
    reverse.add_argument("--timeout", type=float)
    verbs.add_parser("complete", help="retire the source shards (after switch-traffic)")
    verbs.add_parser("cancel", help="stop the workflow and remove the target shards (before switch-traffic)")
    p.set_defaults(func=cmd_reshard)


# Shard lists start with "-" ("-40,40-80"), which argparse takes for an option: glue them to their flag.
_SHARD_LIST_FLAGS = ("--source-shards", "--target-shards")


def _glue_shard_lists(argv: list[str]) -> list[str]:
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in _SHARD_LIST_FLAGS:
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(_glue_shard_lists(sys.argv[1:] if argv is None else argv))
    _setup_logging(args.log_level)
    try:
        return int(args.func(args))
    except CliError as e:
        print(f"shardgate: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
