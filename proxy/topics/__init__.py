"""Ordered topics: a transactional, time-addressable, broadcast message log (CDAP's TMS).

``service`` (the proxy side: registry, SQL hooks, REST operations), ``sequencer`` (ordering,
and why it is commit order with no late arrivals), ``store`` (the SQL on a topic's shard),
``http`` (CDAP's REST API on aiohttp), ``client`` (an asyncio client through the MySQL port).
"""

from proxy.topics.client import TopicClient, TopicFollower
from proxy.topics.service import Message, TopicService

__all__ = ["Message", "TopicClient", "TopicFollower", "TopicService"]
