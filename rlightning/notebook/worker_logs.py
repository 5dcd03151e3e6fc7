"""Worker output in the notebook cell: rate-limited and deduplicated.

With ``log_to_driver`` (Ray's default, and `Lab.local`'s), Ray forwards what env, policy and
storage actors print or log to the driver. Ray prints every line as it comes; a few env workers
logging each step can bury a cell under thousands of lines. `WorkerLogRelay` takes Ray's place
as the handler of those lines:

* lines go to the cell that is running (the driver's ``sys.stdout`` / ``sys.stderr`` at the time,
  which in Jupyter is the executing cell's output), prefixed like Ray's ``(EnvWorker pid=123)``;
* at most ``lines_per_s`` lines a second reach the cell; the rest are counted and a
  ``(k worker log lines suppressed ...)`` line says how many, once the second is over;
* a line that repeats (the same text with its numbers ignored, from any worker) within
  ``dedup_window_s`` is shown once, then ``[repeated kx across cluster]`` with its last form;
* Ray's own messages on that channel (the raylet's, the autoscaler's) go to the rlightning logger,
  like Ray's start-up messages (`rlightning.utils.ray.runtime.ray_messages_to_logger`).

Every line stays in Ray's worker log files whatever the relay shows.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from rlightning.utils.logger import get_cell_logger, get_logger

__all__ = ["DEFAULT_LINES_PER_S", "WorkerLogRelay", "current_relay", "install_worker_log_relay"]

logger = get_logger(__name__)
cell = get_cell_logger(__name__)  # what the user sees in the running cell

#: Worker log lines per second shown in a cell (`Lab.local(worker_log_lines_per_s=...)`).
DEFAULT_LINES_PER_S = 20.0
_RAY_HANDLER = "ray_print_logs"  # the name Ray registers (and removes at ray.shutdown) its handler under
_NUMBERS = re.compile(r"(\d+|0x[0-9a-fA-F]+)")
_relay: Dict[str, Optional[WorkerLogRelay]] = {"current": None}


def _canonical(line: str) -> str:
    """The line with its words holding numbers removed: the same message from two workers, or two steps, matches."""
    return " ".join(word for word in line.split() if not _NUMBERS.search(word))


@dataclass
class _Seen:
    first: float
    prefix: str
    line: str
    is_err: bool
    repeats: int = 0


class WorkerLogRelay:
    """Shows Ray's forwarded worker lines in the running cell, at most ``lines_per_s`` a second, deduplicated.

    Args:
        lines_per_s: Lines shown per second (more are counted and summarised); must be > 0.
        dedup_window_s: A repeated line within this many seconds is counted, not shown (0: no deduplication).
        clock: Monotonic seconds (tests pass a fake one).
        timer: ``timer(delay_s, fn)`` calls ``fn`` once after ``delay_s`` (the end-of-second summary); default a
            daemon ``threading.Timer``.

    Raises:
        ValueError: ``lines_per_s`` not positive, or ``dedup_window_s`` negative.
    """

    def __init__(
        self,
        lines_per_s: float = DEFAULT_LINES_PER_S,
        dedup_window_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        timer: Optional[Callable[[float, Callable[[], None]], Any]] = None,
    ) -> None:
        if not isinstance(lines_per_s, (int, float)) or isinstance(lines_per_s, bool) or lines_per_s <= 0:
            raise ValueError(f"worker log lines_per_s must be a number > 0, got {lines_per_s!r}")
        if not isinstance(dedup_window_s, (int, float)) or dedup_window_s < 0:
            raise ValueError(f"worker log dedup_window_s must be a number >= 0, got {dedup_window_s!r}")
        self.lines_per_s = float(lines_per_s)
        self.dedup_window_s = float(dedup_window_s)
        self._clock = clock
        self._timer = timer or _daemon_timer
        self._lock = threading.RLock()
        self._window_start = clock()
        self._shown_in_window = 0.0
        self._suppressed = 0
        self._summary_pending = False
        self._seen: Dict[str, _Seen] = {}
        #: Totals since the relay was made: worker lines received; lines written (``[repeated kx]`` lines
        #: included), suppressed by the rate limit, and folded as repeats.
        self.counts = {"lines": 0, "shown": 0, "suppressed": 0, "repeated": 0}

    # ------------------------------------------------------------------ Ray's handler
    def __call__(self, data: Dict[str, Any]) -> None:
        """Handle one batch as Ray's log subscriber delivers it (``pid``, ``ip``, ``lines``, ``is_err``, ...)."""
        try:
            self._handle(data)
        except Exception as err:  # noqa: BLE001 - never break Ray's log thread
            logger.debug("worker log relay failed on a batch: %r", err)

    def _handle(self, data: Dict[str, Any]) -> None:
        pid = data.get("pid")
        lines = [line for line in data.get("lines") or [] if line.strip()]
        if pid in ("raylet", "autoscaler"):
            for line in lines:  # Ray's own messages: the logger, shown at log.level
                logger.info("ray %s: %s", pid, line)
            return
        prefix = _prefix(data)
        is_err = bool(data.get("is_err"))
        for line in lines:
            self.offer(prefix, line, is_err)

    # ------------------------------------------------------------------ the filter
    def offer(self, prefix: str, line: str, is_err: bool = False) -> bool:
        """Show ``prefix line`` unless it repeats or the second's lines are spent; True when shown."""
        with self._lock:
            self.counts["lines"] += 1
            now = self._clock()
            self._roll(now)
            self._expire(now)
            if self.dedup_window_s > 0:
                key = _canonical(line)
                seen = self._seen.get(key)
                if seen is not None:
                    seen.repeats += 1
                    seen.prefix, seen.line, seen.is_err = prefix, line, is_err
                    self.counts["repeated"] += 1
                    return False
                self._seen[key] = _Seen(now, prefix, line, is_err)
            return self._emit_limited(f"{prefix} {line}", is_err)

    def flush(self) -> None:
        """Write what is pending now: the repeat counts and the suppressed-lines summary."""
        with self._lock:
            self._expire(float("inf"))
            self._write_summary()

    # ------------------------------------------------------------------ internals
    def _emit_limited(self, text: str, is_err: bool) -> bool:
        if self._shown_in_window + 1 > self.lines_per_s:
            self._suppressed += 1
            self.counts["suppressed"] += 1
            if not self._summary_pending:
                self._summary_pending = True
                delay = max(0.0, self._window_start + 1.0 - self._clock())
                self._timer(delay, self._summary_due)
            return False
        self._shown_in_window += 1
        self.counts["shown"] += 1
        _write(text, is_err)
        return True

    def _roll(self, now: float) -> None:
        """Start a new one-second window when the current one is over (writing its summary)."""
        if now - self._window_start >= 1.0:
            self._write_summary()
            self._window_start = now
            self._shown_in_window = 0.0

    def _expire(self, now: float) -> None:
        """Forget lines older than the dedup window; the repeated ones get their ``[repeated kx]`` line."""
        for key in [k for k, s in self._seen.items() if now - s.first >= self.dedup_window_s]:
            seen = self._seen.pop(key)
            if seen.repeats:
                self._emit_limited(f"{seen.prefix} {seen.line} [repeated {seen.repeats}x across cluster]", seen.is_err)

    def _summary_due(self) -> None:
        with self._lock:
            self._roll(self._clock())
            if self._suppressed:  # the window has not rolled (a clock that stands still): write it now
                self._write_summary()

    def _write_summary(self) -> None:
        self._summary_pending = False
        if not self._suppressed:
            return
        count, self._suppressed = self._suppressed, 0
        _write(
            f"({count} worker log line{'s' if count != 1 else ''} suppressed: more than {self.lines_per_s:g} a "
            "second; Ray's worker log files have them all, and Lab.local(worker_log_lines_per_s=...) sets the rate)",
            False,
        )


def _prefix(data: Dict[str, Any]) -> str:
    name = data.get("actor_name") or data.get("task_name") or ""
    ip = data.get("ip")
    where = f", ip={ip}" if ip and ip != data.get("localhost") else ""
    return f"({name + ' ' if name else ''}pid={data.get('pid')}{where})"


def _write(text: str, is_err: bool) -> None:
    # The handler looks the stream up now: in Jupyter, the running cell's.
    cell.info("%s", text, extra={"cell_stream": "stderr" if is_err else "stdout"})


def _daemon_timer(delay_s: float, fn: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(delay_s, fn)
    timer.daemon = True
    timer.start()
    return timer


def current_relay() -> Optional[WorkerLogRelay]:
    """The relay installed in this process, or None."""
    return _relay["current"]


def install_worker_log_relay(
    lines_per_s: Optional[float] = DEFAULT_LINES_PER_S, **kwargs: Any
) -> Optional[WorkerLogRelay]:
    """Put a `WorkerLogRelay` in place of Ray's printer of forwarded worker lines.

    Does nothing (returns None) when Ray forwards no worker output to this driver
    (``log_to_driver=False``) or ``lines_per_s`` is None (Ray's own printer stays). Calling it again
    replaces the relay (a new rate). ``ray.shutdown`` removes it with Ray's handler.

    Args:
        lines_per_s: Lines per second shown in the cell.
        **kwargs: More `WorkerLogRelay` arguments (``dedup_window_s``).
    """
    if lines_per_s is None:
        return None
    relay = WorkerLogRelay(lines_per_s, **kwargs)
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    with dispatcher._lock:
        names = [name for name, _ in dispatcher.handlers]
    if _RAY_HANDLER not in names:
        return None
    previous = _relay["current"]
    if previous is not None:
        previous.flush()
    dispatcher.remove_handler(_RAY_HANDLER)
    dispatcher.add_handler(_RAY_HANDLER, relay)
    _relay["current"] = relay
    return relay
