"""Where the per-campaign work of ingest and assess runs: in this process, or on a Ray cluster.

A unit of work is a pure function of files that returns frames; the caller consumes the results
in order and alone writes the store, in one transaction. So the store's rules do not depend on
the engine and results are bit-identical. Ray is optional and imported only when asked for
(docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pipeline.errors import ExitCode, ExplainError, StoreError, UsageError

R = TypeVar("R")
ENGINES = ("local", "ray")
RAY_INSTALL = "pip install 'explain-pipeline[ray]'"
WINDOW_PER_CPU = 2
"""Tasks in flight per worker CPU: enough to keep every worker busy while the driver consumes
results in order, few enough that results waiting at the driver stay bounded."""


class Engine(Protocol):
    in_process: bool
    """True when the work runs in this process (it may then report progress directly)."""

    def map(self, fn: Callable[..., R], work: Iterable[tuple[Any, ...]]) -> Iterator[R]:
        """``fn(*args)`` for every ``args`` of ``work``, yielded in the order of ``work``."""
        ...


class LocalEngine:
    """One call after the other, in this process, lazily (one result held at a time)."""

    in_process = True

    def map(self, fn: Callable[..., R], work: Iterable[tuple[Any, ...]]) -> Iterator[R]:
        return (fn(*args) for args in work)


# -- Ray -------------------------------------------------------------------------------------------
def require_ray() -> Any:
    """The ray module, or a usage error (exit 2) that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise UsageError(
            f"--engine ray needs Ray ({exc}); install it with: {RAY_INSTALL}"
        ) from None
    return ray


@dataclass(frozen=True)
class _Failed:
    """An error the user can act on, raised by a worker, carried back to be raised here."""

    error: ExplainError


def _call_in(cwd: str, fn: Callable[..., R], args: tuple[Any, ...]) -> R | _Failed:
    """Runs on a worker: in the driver's working directory, so relative paths (in messages and
    in attempts.source_dir) read exactly as with the local engine."""
    try:
        os.chdir(cwd)
    except OSError as exc:
        where = f"Ray worker on {socket.gethostname()}"
        return _Failed(
            StoreError(
                f"{where}: cannot enter the driver's working directory {cwd} ({exc.strerror}): "
                "the store and the inputs must be on storage every node mounts at the same path"
            )
        )
    try:
        return fn(*args)
    except ExplainError as exc:
        return _Failed(exc)


class RayEngine:
    """Each unit of work is one Ray task; at most ``window`` are in flight at a time."""

    in_process = False

    def __init__(self, ray: Any, window: int) -> None:
        self._ray = ray
        self._window = max(1, window)
        # Tasks are pure (they read files and return frames), so a task lost with its node is
        # simply run again.
        self._remote = ray.remote(max_retries=3)(_call_in)

    def map(self, fn: Callable[..., R], work: Iterable[tuple[Any, ...]]) -> Iterator[R]:
        cwd = os.getcwd()
        pending: deque[Any] = deque()
        for args in work:
            pending.append(self._remote.remote(cwd, fn, args))
            if len(pending) >= self._window:
                yield self._get(pending.popleft())
        while pending:
            yield self._get(pending.popleft())

    def _get(self, ref: Any) -> Any:
        try:
            result = self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as exc:  # a bug in the task: its own exception
            raise exc.cause if isinstance(exc.cause, Exception) else exc from None
        except self._ray.exceptions.RayError as exc:  # the cluster failed (node lost, OOM, ...)
            raise ExplainError(
                f"the Ray cluster could not run a task: {type(exc).__name__}: {exc}; "
                "nothing was written",
                ExitCode.INTERNAL,
            ) from exc
        if isinstance(result, _Failed):
            raise result.error
        return result


def _check_reachable(address: str) -> None:
    """HOST:PORT must accept a connection: Ray itself retries an unreachable address for
    minutes, logging as it goes, before it gives up."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and other forms Ray resolves itself, failing fast
    try:
        with socket.create_connection((host, int(port)), timeout=10):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(
            f"--ray-address {address}: no Ray cluster answers there ({reason})"
        ) from None


def _start(ray: Any, address: str | None) -> None:
    """Connect to ``address``, or start a local cluster on this machine's cores."""
    if address:
        _check_reachable(address)
    options: dict[str, Any] = {"logging_level": logging.ERROR, "include_dashboard": False}
    try:
        ray.init(address=address or "local", **options)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        where = f"--ray-address {address}: cannot connect to" if address else "cannot start"
        raise UsageError(f"{where} a Ray cluster: {exc}") from None


@contextlib.contextmanager
def open_engine(name: str = "local", ray_address: str | None = None) -> Iterator[Engine]:
    """The engine ``name``. With Ray: joins the session this process already has (as tests do),
    else connects to ``ray_address`` or starts a local cluster, shut down again at the end."""
    if name not in ENGINES:
        raise UsageError(f"--engine {name}: expected one of {', '.join(ENGINES)}")
    if name == "local":
        if ray_address is not None:
            raise UsageError("--ray-address needs --engine ray")
        yield LocalEngine()
        return
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        _start(ray, ray_address)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        yield RayEngine(ray, WINDOW_PER_CPU * cpus)
    finally:
        if started:
            ray.shutdown()
