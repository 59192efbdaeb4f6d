"""What every long-lived role (worker, controller, kube bridge) does first in its process:
the GC settings of :mod:`distsched.gc_tuning`, SIGTERM and SIGINT setting its stop event,
and a Redis client without redis-py's own retries (the role's loop waits out outages with
its backoff and says so; hidden retries would only stall it silently)."""

from __future__ import annotations

import signal
import threading

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distsched import gc_tuning
from distsched.connection import RedisOptions, connect


def start_role(
    options: RedisOptions, stop: threading.Event | None
) -> tuple[threading.Event, redis.Redis]:
    """The role's stop event (``stop``, or a new one the signals set) and its client."""
    gc_tuning.tune()
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    client = connect(options)
    client.set_retry(Retry(NoBackoff(), 0))
    return stop, client
