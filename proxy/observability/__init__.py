"""Observability of the proxy (issue 12): Prometheus metrics and the debug pages on the
HTTP listener (``http:`` in the cluster file).

- ``metrics``: the metric definitions and the recording functions the query path calls.
- ``state_sampler``: state figures (pools, sessions, transactions, messaging, 2PC, CDC lag)
  read into the metrics every second and before a scrape.
- ``process_group``: one scrape for every ``--workers`` process (prometheus_client's
  multiprocess mode).
- ``figures``: a scrape as plain data (``/debug/vars``, the status page, the history).
- ``history``: QPS and latency of the last minutes; ``slow_queries``: the slowest recent
  statements; ``cdc_streams``: the VSTREAM statements being served; ``health``: shard pings.
- ``debug_routes``: ``/metrics``, ``/debug/vars``, ``/debug/query_plans``, ``/debug/health``,
  ``/debug/status`` (rendered by ``status_page``).
- ``service``: ``Observability``, one per proxy process, owning the sampler task.
"""
