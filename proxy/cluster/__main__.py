"""Run only the local MariaDB shards of a cluster file until Ctrl-C (a development aid).

    python -m proxy.cluster examples/local/cluster.yaml [--data-dir DIR] [--base-port N]

`shardgate up` is the real entry point: it starts these shards and the proxy in front of them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from proxy.cluster.errors import ClusterError
from proxy.cluster.local import LocalCluster
from proxy.config import ConfigError, load_config


async def run(args: argparse.Namespace) -> None:
    config = load_config(args.config, data_dir=args.data_dir, base_port=args.base_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with LocalCluster(config) as cluster:
        for (keyspace, shard), endpoint in cluster.endpoints.items():
            sys.stdout.write(f"{keyspace}/{shard}\t{endpoint.host}:{endpoint.port}\n")
        sys.stdout.flush()
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m proxy.cluster", description=__doc__)
    parser.add_argument("config", help="cluster YAML file")
    parser.add_argument("--data-dir", help="override local.data_dir")
    parser.add_argument("--base-port", type=int, help="override local.base_port")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(run(args))
    except (ConfigError, ClusterError) as e:
        logging.getLogger("proxy.cluster").error("%s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
