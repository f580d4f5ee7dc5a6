"""verl's metric formats, parsed; metrics.jsonl, the status line's numbers and the plot.

The lines are produced here the way verl's loggers produce them (the format
of verl/utils/logger/aggregate_logger.py's concat_dict_to_str and of
verl/utils/tracking.py's FileLogger, written out as a format, not imported)."""

from __future__ import annotations

import json
import math
import pprint

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorrl.runtime import metrics

KEY_PARTS = ["critic", "score", "mean", "actor", "lr", "val-core", "openai", "gsm8k", "reward", "mean@1",
             "timing_s", "perf", "a:b", "x_y", "é"]
keys = st.lists(st.sampled_from(KEY_PARTS), min_size=1, max_size=4).map("/".join)
plain = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**12, 10**12), st.booleans())
values = st.one_of(plain, plain.filter(lambda v: not isinstance(v, bool)).map(
    lambda v: np.float64(v) if isinstance(v, float) else np.int64(v)))
metric_dicts = st.dictionaries(keys, values, min_size=1, max_size=8)


def verl_console(step: int, data: dict) -> str:
    """The console logger's line: 'step:N', then 'key:pformat(value)' of every number, ' - ' between."""
    return " - ".join([f"step:{step}"] + [f"{k}:{pprint.pformat(v)}" for k, v in data.items()])


def verl_file(step: int, data: dict) -> str:
    return json.dumps({"step": step, "data": {k: v.item() if hasattr(v, "item") else v for k, v in data.items()}})


def finite(data: dict) -> dict:
    return {k: float(v) for k, v in data.items() if math.isfinite(float(v))}


@settings(max_examples=300)
@given(step=st.integers(0, 10**7), data=metric_dicts,
       prefix=st.sampled_from(["", "(TaskRunner pid=4242) ", "\x1b[36m(TaskRunner pid=7)\x1b[0m "]))
def test_console_lines_read_back_every_finite_number(step, data, prefix):
    assert metrics.parse_console_line(prefix + verl_console(step, data)) == (step, finite(data))


@given(step=st.integers(0, 10**7), data=metric_dicts)
def test_file_logger_lines_read_back_every_finite_number(step, data):
    assert metrics.parse_file_line(verl_file(step, data)) == (step, finite(data))


@given(st.text(max_size=80))
def test_other_lines_are_not_metrics_or_say_what_they_hold(line):
    parsed = metrics.parse_console_line(line)
    if parsed is not None:
        assert f"step:{parsed[0]} - " in line
    assert metrics.parse_file_line(line) is None or line.lstrip().startswith("{")


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(metric_dicts, min_size=1, max_size=5), cuts=st.lists(st.integers(0, 2000), max_size=6))
def test_chunks_cut_anywhere_give_the_same_points(tmp_path_factory, steps, cuts):
    text = "Total training steps: 40\nsome other output\n" + "".join(
        verl_console(i + 1, d) + "\n" for i, d in enumerate(steps))
    path = tmp_path_factory.mktemp("m") / "metrics.jsonl"
    follower = metrics.Follower(path, clock=lambda: 5.0)
    at = 0
    for cut in sorted(c % (len(text) + 1) for c in cuts) + [len(text)]:
        follower.feed_console(text[at:cut])
        at = cut
    follower.close()
    assert follower.total == 40
    points = metrics.read_points(path)
    assert [(p.step, p.metrics) for p in points] == [(i + 1, finite(d)) for i, d in enumerate(steps)]


def test_a_step_reported_by_both_loggers_is_kept_once(tmp_path):
    follower = metrics.Follower(tmp_path / "metrics.jsonl")
    assert follower.add(1, {"a": 1.0}, source="console")
    assert not follower.add(1, {"a": 1.0}, source="file")
    assert follower.add(2, {"a": 2.0}, source="file")
    assert not follower.add(2, {"a": 2.0}, source="console") and not follower.add(1, {}, source="file")
    follower.close()
    assert [(p.step, p.source) for p in metrics.read_points(tmp_path / "metrics.jsonl")] == [(1, "console"), (2, "file")]


def _points(times, extra=lambda i: {}):
    return [metrics.Point(step=i + 1, time=t, source="console",
                          metrics={"critic/score/mean": i / 10, **extra(i)}) for i, t in enumerate(times)]


def test_pace_eta_and_reward_from_the_trainer_timing_else_the_clock():
    # Seen every 30 s: 120 steps/h; 8 of 10 steps left -> 4 minutes.
    s = metrics.summarise(_points([0.0, 30.0]), total=10)
    assert (s.step, s.total, round(s.steps_per_hour), round(s.eta_s)) == (2, 10, 120, 240)
    assert s.reward_key == "critic/score/mean" and s.reward == 0.1
    # verl's own step time wins over when tutorrl happened to see the lines.
    s = metrics.summarise(_points([0.0, 30.0], lambda i: {"perf/time_per_step": 60.0}), total=10)
    assert round(s.steps_per_hour) == 60 and round(s.eta_s) == 480
    assert metrics.status_text(s) == "step 2/10, 60 steps/h, ETA 8m, score 0.1"
    unknown = metrics.summarise(_points([0.0]), total=None)
    assert metrics.status_text(unknown) == "step 1/?, ETA unknown (total steps not known yet), score 0"
    # verl's step time is its compute alone: between two steps the run also saves, rolls out, hashes.
    # The demo's steps came 3.5 s apart with verl timing 0.45 s each: the pace is the 3.5 s.
    demo = metrics.summarise(_points([27.0, 30.5], lambda i: {"perf/time_per_step": 0.45}), total=2)
    assert round(demo.steps_per_hour) == 1029 and demo.eta_s == 0
    assert metrics.status_text(demo) == "step 2/2, 1,029 steps/h, ETA 0s, score 0.1"
    # After one step there is no interval to measure: no pace, no ETA, whatever verl timed.
    first = metrics.summarise(_points([27.0], lambda i: {"perf/time_per_step": 0.45}), total=2)
    assert first.steps_per_hour is None and first.eta_s is None
    assert metrics.status_text(first) == "step 1/2, score 0"
    rewards_only = [metrics.Point(step=1, time=0, source="file", metrics={"critic/rewards/mean": 0.5})]
    assert "reward 0.5" in metrics.status_text(metrics.summarise(rewards_only, 3))


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=200), st.integers(1, 80))
def test_sparkline_is_bounded_and_ordered(values, width):
    line = metrics.sparkline(values, width)
    assert 1 <= len(line) <= min(len(values), width)
    assert set(line) <= set("▁▂▃▄▅▆▇█")
    if len(values) <= width and max(values) > min(values):
        assert line[values.index(max(values))] == "█" and line[values.index(min(values))] == "▁"
