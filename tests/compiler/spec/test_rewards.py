"""The reward plug-in seam: entry points, typed options with located errors, what a plug-in fills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

from tutorrl.compiler import compile_bytes
from tutorrl.compiler.spec.rewards import BUILTIN, GROUP


def test_builtin_names_are_exactly_the_registered_entry_points():
    registered = {ep.name: ep.value for ep in entry_points(group=GROUP) if ep.dist and ep.dist.name == "tutorrl"}
    assert registered == BUILTIN


PLUGIN = '''
import msgspec
from typing import Annotated

class Options(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    judge: Annotated[str, msgspec.Meta(min_length=1, description="The judge model.")]
    temperature: Annotated[float, msgspec.Meta(ge=0.0, le=2.0)] = 0.0

class Judge:
    name = "llm-judge"
    version = "2.3"
    Options = Options

    def normalize(self, spec, options):
        return {"reward.module": "judges.entry", "reward.function": "score",
                "reward.kwargs": {"judge": options.judge, "temperature": options.temperature},
                "env.set": {"JUDGE_MODE": "strict"}}

    def rules(self, spec, options):
        if options.temperature > 1.0:
            return [("reward.options.temperature", "a hot judge disagrees with itself", None)]
        return []

    def paths(self, options):
        return []

PLUGIN = Judge()
'''


def _install_plugin(tmp_path):
    site = tmp_path / "site"
    (site / "judge_plugin-2.3.dist-info").mkdir(parents=True, exist_ok=True)
    (site / "judge_plugin.py").write_text(PLUGIN)
    (site / "judge_plugin-2.3.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: judge-plugin\nVersion: 2.3\n")
    (site / "judge_plugin-2.3.dist-info" / "entry_points.txt").write_text(
        f"[{GROUP}]\nllm-judge = judge_plugin:PLUGIN\n")
    return site


SPEC = textwrap.dedent("""\
    [experiment]
    verl = "0.9.1"
    [trainer]
    loggers = ["console"]
    [reward]
    plugin = "llm-judge"
    kwargs = { temperature = 0.5 }
    [reward.options]
    judge = "Qwen/Qwen2.5-72B-Instruct"
    """)


def _compile(tmp_path, text, *extra):
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(_install_plugin(tmp_path))}
    return subprocess.run([sys.executable, "-m", "tutorrl", "compile", str(spec), "--out", str(tmp_path / "b"),
                           *extra], capture_output=True, text=True, env=env, check=False)


def test_a_third_party_plugin_is_found_through_its_entry_point(tmp_path):
    proc = _compile(tmp_path, SPEC)
    assert proc.returncode == 0, proc.stderr
    bundle = tmp_path / proc.stdout.strip()
    if not bundle.is_dir():
        bundle = next((tmp_path / "b").iterdir())
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["reward_plugin"] == "llm-judge 2.3"
    launch = (bundle / "launch.sh").read_text()
    assert "'reward.custom_reward_function.path=\"pkg://judges.entry\"'" in launch
    assert "'+reward.custom_reward_function.reward_kwargs.judge=\"Qwen/Qwen2.5-72B-Instruct\"'" in launch
    # The user's kwargs entry wins over the plug-in's, entry by entry.
    assert "+reward.custom_reward_function.reward_kwargs.temperature=0.5" in launch
    assert "export JUDGE_MODE=strict" in (bundle / "bundle.env").read_text()
    # The normalised spec states what the plug-in filled.
    spec = (bundle / "spec.toml").read_text()
    assert 'module = "judges.entry"' in spec and "temperature = 0.0" in spec


def test_plugin_options_and_rules_are_located(tmp_path):
    text = SPEC.replace('judge = "Qwen/Qwen2.5-72B-Instruct"', 'judge = ""\ntemprature = 3.0')
    proc = _compile(tmp_path, text)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "spec.toml:9:1: reward.options.judge:" in proc.stderr
    assert "reward.options.temprature: unknown key" in proc.stderr and "did you mean 'temperature'" in proc.stderr
    hot = _compile(tmp_path, SPEC.replace('judge = "Qwen', 'temperature = 1.5\njudge = "Qwen'))
    assert hot.returncode == 2 and "reward.options.temperature: a hot judge disagrees with itself" in hot.stderr


def test_no_plugin_no_chess():
    """A spec without a plug-in says nothing about chess anywhere in its launch."""
    compiled = compile_bytes(b'[experiment]\nverl = "0.9.1"\n[reward]\nmodule = "m.r"\n', "s.toml")
    text = b"".join(compiled.files.values()).decode().lower()
    assert "chess" not in text and "studentsim" not in text and "noset_cuda" not in text


# A third-party plug-in that misbehaves as BROKEN says: what it fills is
# checked as the user's own values are, and whatever it raises is named.
BROKEN_PLUGIN = '''
import datetime, os
import msgspec

if os.environ["BROKEN"] == "import":
    raise ImportError("No module named 'judges_runtime'")

class Options(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    judge: str = "j"

FILLS = {
    "module pattern": {"reward.module": "judges/entry.py"},
    "int64": {"reward.kwargs": {"budget": 2**70}},
    "newline": {"reward.kwargs": {"prompt": "a\\nb"}},
    "date": {"reward.kwargs": {"since": datetime.date(1979, 5, 27)}},
    "home": {"env.set": {"HOME": "/evil"}},
    "env name": {"env.set": {"A-B": "x"}},
    "other section": {"resources.reward_gpus": 1},
    "unknown field": {"reward.bogus": 1},
    "not a table": None,
}

class Judge:
    name = "llm-judge"
    version = "2.3"
    Options = Options

    def normalize(self, spec, options):
        mode = os.environ["BROKEN"]
        if mode == "raises":
            raise RuntimeError("judge endpoint not configured")
        if mode == "bare ValueError":
            raise ValueError("reward plug-in llm-judge may not fill resources.nodes")
        return FILLS.get(mode, {"reward.module": "judges.entry"})

    def rules(self, spec, options):
        if os.environ["BROKEN"] == "rules raise":
            raise KeyError("judge")
        if os.environ["BROKEN"] == "rules shape":
            return ["just a string"]
        return []

    def paths(self, options):
        return []

PLUGIN = Judge()
'''


@pytest.mark.parametrize("broken,words", [
    ("import", "the reward plug-in 'llm-judge' (judge_plugin:PLUGIN) could not be loaded: ImportError: No module"),
    ("raises", "reward.plugin: reward plug-in 'llm-judge' 2.3 failed to fill the spec: RuntimeError: judge endpoint"),
    ("bare ValueError", "failed to fill the spec: ValueError: reward plug-in llm-judge may not fill resources.nodes"),
    ("not a table", "failed to fill the spec: normalize returned NoneType, not a table"),
    ("rules raise", "reward plug-in 'llm-judge' 2.3 failed to check the spec: KeyError: 'judge'"),
    ("rules shape", "failed to check the spec: a finding is 'just a string', not (key, message, hint)"),
    ("other section", "reward.plugin: reward plug-in 'llm-judge' 2.3 may not fill resources.reward_gpus"),
    ("unknown field", "may not fill reward.bogus"),
    ("module pattern", "reward.module: filled by reward plug-in 'llm-judge' 2.3: expected a dotted Python module name"),
    ("int64", "reward.kwargs.budget: filled by reward plug-in 'llm-judge' 2.3: an integer of 71 bits"),
    ("newline", "reward.kwargs.prompt: filled by reward plug-in 'llm-judge' 2.3: control characters"),
    ("date", "reward.kwargs.since: filled by reward plug-in 'llm-judge' 2.3: TOML dates and times cannot be passed"),
    ("env name", "env.set.A-B: filled by reward plug-in 'llm-judge' 2.3: expected an environment variable name"),
    # What it fills meets the spec's own rules too: HOME takes the launch over.
    ("home", "env.set.HOME: HOME changes which program or code the launch runs"),
])
def test_a_broken_third_party_plugin_is_a_located_message_naming_it(tmp_path, broken, words):
    site = _install_plugin(tmp_path)
    (site / "judge_plugin.py").write_text(BROKEN_PLUGIN)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace("kwargs = { temperature = 0.5 }\n", "").replace(
        'judge = "Qwen/Qwen2.5-72B-Instruct"', 'judge = "q"'))
    env = {**os.environ, "PYTHONPATH": str(site), "BROKEN": broken}
    proc = subprocess.run([sys.executable, "-m", "tutorrl", "compile", str(spec), "--out", str(tmp_path / "b")],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"error: {spec}:"), proc.stderr
    assert not (tmp_path / "b").exists()


def test_a_plugin_that_fills_well_still_compiles(tmp_path):
    site = _install_plugin(tmp_path)
    (site / "judge_plugin.py").write_text(BROKEN_PLUGIN)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace('judge = "Qwen/Qwen2.5-72B-Instruct"', 'judge = "q"'))
    env = {**os.environ, "PYTHONPATH": str(site), "BROKEN": "no"}
    proc = subprocess.run([sys.executable, "-m", "tutorrl", "compile", str(spec), "--out", str(tmp_path / "b")],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
