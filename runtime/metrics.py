"""verl's training metrics, followed while a run trains, into ``runs/<run-id>/metrics.jsonl``.

verl writes them in two formats, both read here as formats (no verl code):

* its console logger (every release; ``verl/utils/logger/aggregate_logger.py``,
  ``LocalLogger.log`` printing ``concat_dict_to_str``): one line
  ``step:3 - actor/lr:1e-06 - critic/score/mean:0.42``, only values that are
  ``numbers.Number``, each through ``pprint.pformat`` -- so ``nan``, ``inf``,
  ``True``, and, with numpy 2, ``np.float64(0.42)``;
* its ``file`` logger (verl 0.6.0 on; ``verl/utils/tracking.py``
  ``FileLogger``): one JSON object ``{"step": N, "data": {...}}`` per line in
  ``$VERL_FILE_LOGGER_PATH``. verl never flushes that file, so its lines
  arrive in buffer-sized bursts.

Whichever source reports a step first wins, so a run with both loggers gets
each step once. The trainer prints ``Total training steps: N``
(``verl/trainer/ppo/ray_trainer.py``) once it has sized the data: that is the
N of "step k/N" (the spec's ``trainer.total_steps`` before it).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from pathlib import Path

import msgspec

from tutorrl.contract import METRICS as METRICS_FILE  # noqa: F401 - read here as metrics.METRICS_FILE

# Where tutorrl asks verl's file logger to write (when the job sees this machine's files).
VERL_FILE = "verl-metrics.jsonl"
FILE_LOGGER_ENV = "VERL_FILE_LOGGER_PATH"
# The reward shown, in order of preference (verl's names; see metric_utils.compute_data_metrics).
REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")
# Seconds per step as the trainer measured it (perf/ from 0.3; timing_s/step in every release).
STEP_TIME_KEYS = ("perf/time_per_step", "timing_s/step")

# Ray prefixes a worker's lines with "(TaskRunner pid=N) " (coloured on a terminal).
_STEP_LINE = re.compile(r"(?:^|\s)step:(\d+)( - .*)$")
_TOTAL_LINE = re.compile(r"Total training steps: (\d+)")
# pprint of a numpy scalar under numpy 2: np.float64(0.5), np.int64(3), np.True_.
_NUMPY = re.compile(r"^np\.(?:float|int|uint)\d*\((.*)\)$")


class Point(msgspec.Struct, forbid_unknown_fields=False):
    """One line of metrics.jsonl: what verl logged at one step, and when tutorrl saw it."""

    step: int
    time: float
    source: str
    # Finite numbers only; nan/inf are left out (JSON has no spelling for them).
    metrics: dict[str, float]


def _number(text: str) -> float | None:
    text = text.strip()
    m = _NUMPY.match(text)
    if m:
        text = m.group(1)
    if text in ("True", "np.True_"):
        return 1.0
    if text in ("False", "np.False_"):
        return 0.0
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_console_line(line: str) -> tuple[int, dict[str, float]] | None:
    """``step:N - key:value - ...`` -> (N, {key: value}); None for any other line."""
    m = _STEP_LINE.search(line.rstrip("\r\n").rstrip())
    if m is None:
        return None
    metrics: dict[str, float] = {}
    for item in m.group(2).split(" - ")[1:]:
        # A key may hold ':' (verl's own keys do not, users' may); a value never does.
        key, sep, raw = item.rpartition(":")
        value = _number(raw)
        if sep and key and value is not None:
            metrics[key] = value
    return int(m.group(1)), metrics


def parse_file_line(line: str) -> tuple[int, dict[str, float]] | None:
    """One line of verl's file logger -> (step, numeric metrics); None when it is not one."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), dict):
        return None
    step = obj.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    metrics = {}
    for key, value in obj["data"].items():
        if isinstance(value, (int, float)) and math.isfinite(value):
            metrics[str(key)] = float(value)
    return step, metrics


def total_steps_in(text: str) -> int | None:
    found = _TOTAL_LINE.findall(text)
    return int(found[-1]) if found else None


class Follower:
    """Takes verl's output (console chunks, file-logger lines), appends each new
    step to metrics.jsonl at once, and tells ``on_point`` (the status line)."""

    def __init__(self, path: Path, *, total: int | None = None, on_point=None, clock=time.time):
        self.path = path
        self.total = total
        self.points: list[Point] = []
        self._on_point = on_point
        self._clock = clock
        self._pending = ""
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")

    def feed_console(self, text: str) -> None:
        with self._lock:
            text = self._pending + text
            cut = text.rfind("\n") + 1
            self._pending = text[cut:][-65536:]  # a line longer than that is no metrics line
            lines = text[:cut].splitlines()
        for line in lines:
            total = total_steps_in(line)
            if total is not None and total != self.total:
                self.total = total
                if self.points and self._on_point is not None:
                    self._on_point(self)  # the file logger may have been first with the steps
            parsed = parse_console_line(line)
            if parsed is not None:
                self.add(*parsed, source="console")

    def feed_file_line(self, line: str) -> None:
        parsed = parse_file_line(line)
        if parsed is not None:
            self.add(*parsed, source="file")

    def add(self, step: int, metrics: dict[str, float], *, source: str) -> bool:
        with self._lock:
            last = self.points[-1] if self.points else None
            # A step already reported by the other source is not repeated.
            if last is not None and (step < last.step or (step == last.step and source != last.source)):
                return False
            point = Point(step=step, time=self._clock(), source=source, metrics=metrics)
            self.points.append(point)
            self._file.write(msgspec.json.encode(point).decode() + "\n")
            self._file.flush()
        if self._on_point is not None:
            self._on_point(self)
        return True

    def close(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, ""
        if pending:
            self.feed_console(pending + "\n")
        with self._lock:
            self._file.close()


class FileTail:
    """Follows verl's file-logger JSONL as it grows (complete lines only)."""

    def __init__(self, path: Path, follower: Follower, poll_s: float = 0.5):
        self.path = path
        self._follower = follower
        self._poll_s = poll_s
        self._offset = 0
        self._partial = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tutorrl-metrics-tail", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size < self._offset:  # rewritten (verl opens it with "w")
                    self._offset, self._partial = 0, b""
                fh.seek(self._offset)
                chunk = fh.read()
        except OSError:
            return
        self._offset += len(chunk)
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        for line in data[:cut].splitlines():
            self._follower.feed_file_line(line.decode("utf-8", "replace"))

    def _main(self) -> None:
        while not self._stop.wait(self._poll_s):
            self._read()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._read()  # what verl wrote (and flushed on closing) before the job ended


def file_logger_path(spec, job: dict, run_dir: Path, *, upload: bool) -> Path | None:
    """Where verl's file logger should write for tutorrl to follow it: only
    when the spec lists it, the job sees this machine's files, and the spec
    does not choose the path itself."""
    loggers = spec.trainer.loggers
    loggers = [loggers] if isinstance(loggers, str) else (loggers or [])
    if "file" not in loggers or upload or FILE_LOGGER_ENV in ((job.get("runtime_env") or {}).get("env_vars") or {}):
        return None
    return run_dir.resolve() / VERL_FILE


# What `status` reads of metrics.jsonl: its last this many bytes (a line per step: years of steps).
MAX_POINTS_READ = 64 * 1024 * 1024


def read_points(path: Path, limit: int = MAX_POINTS_READ) -> list[Point]:
    """The steps in metrics.jsonl (its last ``limit`` bytes); none when it is not a regular file."""
    from tutorrl._read import ReadError, open_regular

    try:
        with open_regular(path) as fh:
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, end - limit))
            raw = fh.read(limit)
    except (OSError, ReadError):
        return []
    lines = raw.splitlines()
    if end > limit and lines:
        lines = lines[1:]  # the first line was cut by the start of the window
    out = []
    for line in lines:
        try:
            out.append(msgspec.json.decode(line, type=Point))
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue  # a line cut by a crash mid-write
    return out


class Summary(msgspec.Struct):
    step: int | None
    total: int | None
    steps_per_hour: float | None
    eta_s: float | None
    reward_key: str | None
    reward: float | None
    # (step, reward) of every step that logged one, for the plot.
    rewards: list[tuple[int, float]]


def summarise(points: list[Point], total: int | None) -> Summary:
    step = points[-1].step if points else None
    seconds = None
    # The pace is the time from one step to the next (the last 10 intervals): what the run
    # takes, saves and rollouts included, so no pace before the second step. verl's own step
    # time (its compute alone) is a floor: steps never come faster, so a clock interval below
    # it measures lines arriving in a burst, not steps; it is also all a log without times has.
    window = points[-11:]
    if len(window) >= 2 and window[-1].step > window[0].step:
        clock = max(window[-1].time - window[0].time, 0.0) / (window[-1].step - window[0].step)
        timed = [p.metrics[k] for p in window[1:] for k in STEP_TIME_KEYS[:1] if k in p.metrics] or \
            [p.metrics[k] for p in window[1:] for k in STEP_TIME_KEYS[1:] if k in p.metrics]
        floor = sum(timed) / len(timed) if timed else 0.0
        seconds = max(clock, floor) or None
    key = next((k for k in REWARD_KEYS if any(k in p.metrics for p in points)), None)
    rewards = [(p.step, p.metrics[key]) for p in points if key in p.metrics] if key else []
    eta = None
    if seconds is not None and total is not None and step is not None:
        eta = max(total - step, 0) * seconds
    return Summary(step=step, total=total, steps_per_hour=3600.0 / seconds if seconds else None, eta_s=eta,
                   reward_key=key, reward=rewards[-1][1] if rewards else None, rewards=rewards)


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, _ = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m"


def status_text(s: Summary) -> str:
    """``step 12/50, 34.2 steps/h, ETA 1h07m, score 0.412``."""
    if s.step is None:
        return "no step logged yet"
    parts = [f"step {s.step}/{s.total if s.total is not None else '?'}"]
    if s.steps_per_hour is not None:
        rate = s.steps_per_hour
        parts.append(f"{rate:.3g} steps/h" if rate < 1000 else f"{rate:,.0f} steps/h")
    if s.eta_s is not None:
        parts.append(f"ETA {duration(s.eta_s)}")
    elif s.total is None:
        parts.append("ETA unknown (total steps not known yet)")
    if s.reward is not None:
        parts.append(f"{'score' if s.reward_key == REWARD_KEYS[0] else 'reward'} {s.reward:.4g}")
    return ", ".join(parts)


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 60) -> str:
    """One character per value (the last ``width`` values, averaged into buckets when there are more)."""
    if not values:
        return ""
    if len(values) > width:
        size = len(values) / width
        values = [sum(b) / len(b) for b in (values[int(i * size):int((i + 1) * size)] for i in range(width)) if b]
    low, high = min(values), max(values)
    span = high - low
    if span == 0:
        return _BARS[len(_BARS) // 2] * len(values)
    return "".join(_BARS[min(int((v - low) / span * len(_BARS)), len(_BARS) - 1)] for v in values)
