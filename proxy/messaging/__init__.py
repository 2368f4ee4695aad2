"""Vitess-compatible messaging: ``vitess_message`` tables, ``STREAM * FROM t``, acks, backoff,
purge (see ``service`` for the front end's API, ``client`` for applications)."""

from proxy.messaging.service import MessagingService

__all__ = ["MessagingService"]
