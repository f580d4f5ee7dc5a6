"""The reward plug-in seam: entry points, typed options with located errors, what a plug-in fills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

from tutorrl.compiler import compile_bytes
from tutorrl.compiler.rewards import BUILTIN, GROUP


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
