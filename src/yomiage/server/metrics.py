"""Prometheus metrics in the text exposition format (version 0.0.4), no dependency.

Counters, gauges and histograms with fixed label names, safe to update from
any thread. Gauges can instead read a callback at scrape time (queue depth,
in-flight requests). :meth:`Registry.render` writes what ``GET /metrics`` serves.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RTF_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 5.0)

LabelValues = tuple[str, ...]
# Set in a request's ASGI scope when it was turned away before synthesis (its reason).
_TURNED_AWAY = "yomiage.turned_away"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class _Metric:
    kind = ""

    def __init__(self, name: str, help: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(labels)
        self._lock = threading.Lock()

    def _key(self, labels: Sequence[str]) -> LabelValues:
        if len(labels) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {tuple(labels)}")
        return tuple(str(v) for v in labels)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def samples(self) -> list[str]:
        raise NotImplementedError


class _Scalar(_Metric):
    """One number per label set, or one read from ``callback`` at scrape time from
    whoever keeps it (no labels then)."""

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        *,
        callback: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(name, help, labels)
        if callback is not None and labels:
            raise ValueError(f"a {self.kind} with a callback has no labels")
        self._callback = callback
        self._values: dict[LabelValues, float] = {}
        if not labels and callback is None:
            self._values[()] = 0.0

    def value(self, *labels: str) -> float:
        if self._callback is not None:
            return float(self._callback())
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def samples(self) -> list[str]:
        if self._callback is not None:
            return [f"{self.name} {_number(float(self._callback()))}"]
        with self._lock:
            items = sorted(self._values.items())
        return [f"{self.name}{_labels(self.label_names, k)} {_number(v)}" for k, v in items]


class Counter(_Scalar):
    """A total that only grows; ``name`` should end in ``_total``."""

    kind = "counter"

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter cannot go down")
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount


class Gauge(_Scalar):
    """A value that goes up and down."""

    kind = "gauge"

    def set(self, value: float, *labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = float(value)


class Histogram(_Metric):
    """Observations counted into cumulative ``le`` buckets, with their sum and count."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        *,
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> None:
        super().__init__(name, help, labels)
        if "le" in labels:
            raise ValueError("'le' is reserved for histogram buckets")
        self.buckets = (*sorted(float(b) for b in buckets), math.inf)
        self._counts: dict[LabelValues, list[int]] = {}
        self._sums: dict[LabelValues, float] = {}

    def observe(self, value: float, *labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            counts = self._counts.setdefault(key, [0] * len(self.buckets))
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    counts[i] += 1
                    break
            self._sums[key] = self._sums.get(key, 0.0) + value

    def count(self, *labels: str) -> int:
        with self._lock:
            return sum(self._counts.get(self._key(labels), []))

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted((k, list(c), self._sums[k]) for k, c in self._counts.items())
        lines = []
        for key, counts, total in items:
            running = 0
            for bound, n in zip(self.buckets, counts, strict=True):
                running += n
                le = f'le="{_number(bound)}"'
                lines.append(f"{self.name}_bucket{_labels(self.label_names, key, le)} {running}")
            lines.append(f"{self.name}_sum{_labels(self.label_names, key)} {_number(total)}")
            lines.append(f"{self.name}_count{_labels(self.label_names, key)} {running}")
        return lines


class Registry:
    """The metrics of one server, rendered in registration order."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}

    def add(self, metric: _Metric) -> None:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} is already registered")
        self._metrics[metric.name] = metric

    def counter(self, name: str, help: str, labels: Sequence[str] = ()) -> Counter:
        metric = Counter(name, help, labels)
        self.add(metric)
        return metric

    def gauge(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        *,
        callback: Callable[[], float] | None = None,
    ) -> Gauge:
        metric = Gauge(name, help, labels, callback=callback)
        self.add(metric)
        return metric

    def histogram(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        *,
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        metric = Histogram(name, help, labels, buckets=buckets)
        self.add(metric)
        return metric

    def render(self) -> str:
        lines: list[str] = []
        for metric in self._metrics.values():
            lines += metric.header()
            lines += metric.samples()
        return "\n".join(lines) + "\n"


class ServerMetrics:
    """The metrics ``yomiage serve`` exports; names are part of its contract (docs/server.md)."""

    def __init__(
        self,
        *,
        in_flight: Callable[[], float],
        queued: Callable[[], float],
        version: str,
        worker_crashes: Callable[[], float] = lambda: 0.0,
        worker_restarts: Callable[[], float] = lambda: 0.0,
        ready: Callable[[], float] = lambda: 0.0,
    ) -> None:
        r = self.registry = Registry()
        info = r.gauge("yomiage_build_info", "Always 1; the version is a label.", ["version"])
        info.set(1, version)
        self.requests = r.counter(
            "yomiage_http_requests_total",
            "HTTP requests by route template, method and status code.",
            ["route", "method", "status"],
        )
        self.latency = r.histogram(
            "yomiage_http_request_duration_seconds",
            "Time from the request to the last byte of the response, by route template.",
            ["route"],
        )
        self.first_audio = r.histogram(
            "yomiage_time_to_first_audio_seconds",
            "Time from the request to the first audio byte sent (queueing included).",
            ["route"],
        )
        self.audio_seconds = r.counter(
            "yomiage_audio_seconds_total", "Seconds of audio produced, by voice.", ["voice"]
        )
        self.synthesis_seconds = r.counter(
            "yomiage_synthesis_seconds_total",
            "Wall seconds spent producing audio (first to last chunk), by voice.",
            ["voice"],
        )
        self.rtf = r.histogram(
            "yomiage_real_time_factor",
            "Per request: synthesis wall time / audio duration (below 1 is faster than real time).",
            ["voice"],
            buckets=RTF_BUCKETS,
        )
        r.gauge(
            "yomiage_in_flight_requests", "Requests holding a synthesis slot.", callback=in_flight
        )
        r.gauge("yomiage_queue_depth", "Requests waiting for a synthesis slot.", callback=queued)
        self.concurrency_limit = r.gauge(
            "yomiage_concurrency_limit", "Synthesis slots (requests served at once)."
        )
        self.queue_limit = r.gauge("yomiage_queue_limit", "Requests allowed to wait for a slot.")
        self.rejected = r.counter(
            "yomiage_rejected_requests_total",
            "Requests turned away before synthesis (queue_full, queue_timeout, not_ready, "
            "shutting_down); not counted again in yomiage_errors_total.",
            ["reason"],
        )
        self.errors = r.counter(
            "yomiage_errors_total",
            "Error responses by OpenAI error type (but the rejections counted apart), and "
            "failures after streaming began (stream).",
            ["type"],
        )
        self.disconnects = r.counter(
            "yomiage_client_disconnects_total", "Clients that left before their audio was done."
        )
        self.send_timeouts = r.counter(
            "yomiage_send_timeouts_total",
            "Connections closed because the client took none of its response for "
            "--send-timeout seconds (its synthesis stopped, its memory freed).",
        )
        self.voices = r.gauge("yomiage_voices_loaded", "Voices loaded.")
        # Read when scraped, as /ready answers: set at start and stop only, it said 1
        # all through a worker's restart while /ready said 503.
        self.ready = r.gauge(
            "yomiage_ready",
            "1 while /ready answers 200: voices warmed, a worker running, not shutting down.",
            callback=ready,
        )
        r.add(
            Counter(
                "yomiage_worker_crashes_total",
                "Times the synthesis worker process died (each request it held failed).",
                callback=worker_crashes,
            )
        )
        r.add(
            Counter(
                "yomiage_worker_restarts_total",
                "Times a new synthesis worker process was started after a crash.",
                callback=worker_restarts,
            )
        )

    def turn_away(self, scope: MutableMapping[str, Any], reason: str) -> None:
        """Count a request refused before synthesis (a full queue, a wait past the queue
        timeout, a server not ready or stopping): the load it met, not a fault, so its
        error response is left out of ``errors`` (see :meth:`turned_away`)."""
        self.rejected.inc(reason)
        scope[_TURNED_AWAY] = reason

    @staticmethod
    def turned_away(scope: MutableMapping[str, Any]) -> bool:
        """Whether the request of ``scope`` was counted by :meth:`turn_away`."""
        return _TURNED_AWAY in scope

    def render(self) -> str:
        return self.registry.render()
