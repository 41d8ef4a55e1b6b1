"""`/metrics` with vLLM's metric names, so the pool reads this member and a vLLM server alike."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)


class MemberMetrics:
    """One registry per server (never the global one, so tests can run several in a process)."""

    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name"]
        self._running = Gauge(
            "vllm:num_requests_running", "Requests being decoded.", labels, registry=self.registry
        ).labels(model_name)
        self._waiting = Gauge(
            "vllm:num_requests_waiting", "Requests waiting to be decoded.", labels, registry=self.registry
        ).labels(model_name)
        self._ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Time to first token.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        ).labels(model_name)
        self._e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "Request latency, queueing included.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        ).labels(model_name)
        self._queue = Histogram(
            "vllm:request_queue_time_seconds",
            "Time spent waiting in the queue.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        ).labels(model_name)
        self._prompt = Counter(
            "vllm:prompt_tokens", "Prompt tokens processed.", labels, registry=self.registry
        ).labels(model_name)
        self._generated = Counter(
            "vllm:generation_tokens", "Tokens generated.", labels, registry=self.registry
        ).labels(model_name)
        self._success = Counter(
            "vllm:request_success", "Finished requests.", [*labels, "finished_reason"], registry=self.registry
        )
        self._model_name = model_name

    def bind_load(self, running: Callable[[], float], waiting: Callable[[], float]) -> None:
        """Read the gauges from the engine at scrape time."""
        self._running.set_function(running)
        self._waiting.set_function(waiting)

    def queued(self, seconds: float) -> None:
        self._queue.observe(seconds)

    def finished(
        self, reason: str, prompt_tokens: int, completion_tokens: int, *, ttft: float, e2e: float
    ) -> None:
        self._prompt.inc(prompt_tokens)
        self._generated.inc(completion_tokens)
        self._ttft.observe(ttft)
        self._e2e.observe(e2e)
        self._success.labels(self._model_name, reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
