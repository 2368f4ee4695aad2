"""Follow the topic and print every event, in order (`make run` first). Run several: each one
receives every message (a topic is broadcast, nothing is shared out or acknowledged).

    .venv/bin/python examples/topics/consumer.py                          # from the beginning
    .venv/bin/python examples/topics/consumer.py --from-time 1795464764121   # from a point in time (ms)
    .venv/bin/python examples/topics/consumer.py --position-file pos.txt     # resume where it stopped

``--position-file`` keeps the id of the last message handled: a restarted consumer continues
after it (no message twice, none skipped). ``--count N`` stops after N messages.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from cli_options import arguments

from proxy.topics import TopicClient


async def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--from-time", type=int, default=None, help="first publish time to read, in ms")
    parser.add_argument("--position-file", type=Path, default=None)
    parser.add_argument("--count", type=int, default=None, help="stop after this many messages")
    parser.add_argument("--name", default="consumer")
    args = parser.parse_args()
    after = None
    if args.position_file is not None and args.position_file.exists():
        after = args.position_file.read_text().strip() or None
    async with TopicClient(args.host, args.port, user=args.user, password=args.password,
                           keyspace=args.keyspace) as client:
        follower = client.follow(args.topic, after=after, from_time=None if after else args.from_time)
        seen = 0
        try:
            async for message in follower:
                event = json.loads(message.payload)
                print(f"{args.name} {message.id} {message.publish_time} {json.dumps(event)}", flush=True)
                if args.position_file is not None:
                    args.position_file.write_text(message.id)
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
        finally:
            await follower.close()


if __name__ == "__main__":
    asyncio.run(main())
