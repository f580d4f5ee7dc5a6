"""What `tutorrl import` of one script with its round-trip proof costs, before and now.

The proof composes the original launch and the imported spec's launch with
the release's real trainer config (Hydra) and compares them. Before issue 26
each import ran two whole composes, each reading the release's YAML tree with
pure-Python PyYAML; now the config composed without overrides is kept per
release and config-file digest (importer/composecache.py), each launch's
overrides go onto it, and YAML is parsed by libyaml; Hydra and OmegaConf are
imported while the script runs in its jail, each override text is parsed
once for the translation and both compositions, and the command runs without
the cyclic collector (tutorrl.cli's short commands). Rows, for each script
in tests/importer/scripts, alternating in every round:

  * python -c pass, and `tutorrl import --no-check` (the translation alone);
  * before: the same import with round_trip's compose put back to the whole
    compose with OmegaConf's own loader, Hydra imported before the script runs
    rather than while it runs, every read of an override parsed again, and the
    cyclic collector on (the code path of 7a27be0, but for the jail's -S start);
  * now, cold: a cache folder with no base kept yet (the first import of a release);
  * now, warm: the base already kept (every later import). Goal: <= 0.3 s.

What users run: tutorrl installed from its wheel with its ``import`` extra
(Hydra, OmegaConf) into a fresh venv (``bench_compile.install``), never the
editable install, whose import hook adds to every interpreter start, and
started by the console script pip wrote (``python -m tutorrl`` would add
runpy's imports).

Every run gets a HOME of its own whose .cache/tutorrl/configs is the user's
(the release's extracted config; fetched once if absent), so the cold rows
really start without a kept base and the user's cache is never touched.

    python benchmarks/bench_import.py [--runs 5] [--scripts grpo_fsdp_lists,...]

The suite runs it with --runs 1 --scripts grpo_fsdp_lists as a smoke test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench_compile import install

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "importer" / "scripts"
EXTRA = {"megatron_moe_dapo": ["--var", "SLURM_JOB_NUM_NODES=2"]}
# Each script at the release it round-trips exactly at (tests/importer/golden).
RELEASES = {"grpo_fsdp_lists": "0.9.1", "ppo_critic_rm": "0.6.1", "megatron_moe_dapo": "0.7.0"}

# The import as it was: the collector on, Hydra imported before the script runs, each override parsed
# anew at every read, and round_trip's two whole Hydra composes with OmegaConf's pure-Python YAML loader.
BEFORE = """
import sys
from pathlib import Path
import tutorrl._startup as startup
import tutorrl.importer.launch as c
import tutorrl.importer.overrides as o
import tutorrl.importer.roundtrip as r

launches = c._launches_from_args

def hydra_first(args, meanwhile=None):
    if meanwhile is not None:
        meanwhile()
    return launches(args)

c._launches_from_args = hydra_first
o.parse = o.parse.__wrapped__
startup.SHORT = startup.SHORT - {"import"}

def whole(root, config_name, overrides, config_path=None, base=None, cache=None, entry="", recipe=None):
    assert entry in ("", "ppo") and recipe is None, "the benchmark's scripts launch main_ppo"
    config_dir = root / "verl" / "trainer" / "config"
    if config_path is not None:
        custom = Path(config_path)
        config_dir = custom if custom.is_absolute() else (base or root / "verl" / "trainer") / custom
    return r._compose(root, config_dir, config_name, overrides)

r.compose = whole
sys.argv = ["tutorrl", *sys.argv[1:]]
from tutorrl.cli import entry
entry()
"""


def _home(root: Path, configs: Path, name: str) -> Path:
    home = root / name
    (home / ".cache" / "tutorrl").mkdir(parents=True)
    (home / ".cache" / "tutorrl" / "configs").symlink_to(configs)
    return home


def _timed(argv: list[str], home: Path, cwd: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env["HOME"] = str(home)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    proves = "import" in argv and "--no-check" not in argv
    # Without the proof an import exits 1 (not shown exact); with it, 0 and "exact".
    if done.returncode != (1 if "--no-check" in argv else 0) or (proves and "round trip: exact" not in done.stdout):
        raise SystemExit(f"{' '.join(argv)} (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scripts", default="grpo_fsdp_lists,ppo_critic_rm,megatron_moe_dapo")
    args = parser.parse_args()
    from tutorrl.importer.roundtrip import config_root

    scripts = args.scripts.split(",")
    configs = [config_root(RELEASES[s]) for s in scripts][0].parent  # the user's extracted configs (fetched once)
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        py = str(install(root / "wheel", extras="import"))
        # The console script pip wrote, as users start it (`-m tutorrl` adds runpy's imports).
        exe = str(Path(py).parent / "tutorrl")
        warm = _home(root, configs, "warm")
        for script in scripts:
            path = str(SCRIPTS / f"{script}.sh")
            cmd = ["import", path, "--verl", RELEASES[script], *EXTRA.get(script, [])]
            rows = {"python -c pass": lambda i: [py, "-c", "pass"],
                    "import --no-check": lambda i: [exe, *cmd, "--no-check", "-o", f"n{i}.toml"],
                    "import, before (two whole composes)": lambda i: [py, "-c", BEFORE, *cmd, "-o", f"b{i}.toml"],
                    "import, now, cold (no base kept)": lambda i: [exe, *cmd, "-o", f"c{i}.toml"],
                    "import, now, warm (base kept)": lambda i: [exe, *cmd, "-o", f"w{i}.toml"]}
            _timed(rows["import, now, warm (base kept)"](-1), warm, root)  # keeps the base; bytecode warm
            _timed(rows["import, before (two whole composes)"](-1), warm, root)
            times: dict[str, list[float]] = {name: [] for name in rows}
            for i in range(args.runs):
                for name, argv in rows.items():
                    home = _home(root, configs, f"cold-{script}-{i}") if "cold" in name else warm
                    times[name].append(_timed(argv(i), home, root))
                    if "cold" in name:
                        shutil.rmtree(home)
            table.append((script, times))
    print(f"{'script':<18} {'what':<38} {'runs':>5} {'median s':>9} {'min s':>7} {'x before (pairs)':>17}")
    for script, times in table:
        before = times["import, before (two whole composes)"]
        for name, seq in times.items():
            pairs = statistics.median(t / b for t, b in zip(seq, before))
            print(f"{script:<18} {name:<38} {len(seq):>5} {statistics.median(seq):>9.3f} {min(seq):>7.3f} "
                  f"{pairs:>17.2f}")


if __name__ == "__main__":
    main()
