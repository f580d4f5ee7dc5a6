"""What a dry run leaves in its run record, and the summary printed for it.

A dry run starts ``launch.sh --cfg all``: verl's own Hydra composes the config
with every override and prints it -- Hydra's own section (``hydra:``, which
lists the overrides it applied under ``hydra.overrides.task``) and then verl's
-- without training. When the job sees this machine's files, its standard
output goes straight to ``runs/<run-id>/hydra-cfg-all.yaml`` (the job log keeps
standard error: warnings, and verl's message when it refuses an override), and
tutorrl writes verl's part alone to ``verl-config.yaml``: the full config verl
would train with, the same text ``--cfg job`` prints. The terminal gets a
short summary instead of a thousand lines of config: what was composed, what
the dry run proved and what it did not (:func:`proof_lines`), and where the
config and the log are.

Hydra prints with OmegaConf's YAML dump: top-level keys at column 0, nested
keys and list items indented. The reading below relies on that and nothing
else, and it only reads; it never re-serialises verl's config.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ARGS = ("--cfg", "all")
RAW_FILE = "hydra-cfg-all.yaml"
CONFIG_FILE = "verl-config.yaml"


@dataclass
class Composed:
    verl_config: str  # every top-level section except Hydra's own
    overrides: int | None  # len(hydra.overrides.task); None when the text has no such list


def _top_level_blocks(lines: list[str]) -> list[tuple[str, list[str]]]:
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        if line and not line[0].isspace() and not line.startswith("- "):
            blocks.append((line.split(":", 1)[0], [line]))
        elif blocks:
            blocks[-1][1].append(line)
    return blocks


def count_task_overrides(lines: list[str]) -> int | None:
    """Items of ``hydra.overrides.task`` in Hydra's printed config (or in a log holding it)."""
    try:
        start = lines.index("hydra:")
    except ValueError:
        return None
    in_overrides = False
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line and not line[0].isspace():
            return None  # left Hydra's section without finding the list
        if line.startswith("  ") and not line.startswith("   "):
            in_overrides = line == "  overrides:"
            continue
        if not in_overrides:
            continue
        if line == "    task: []":
            return 0
        if line == "    task:":
            count = 0
            for item in lines[i + 1:]:
                if item.startswith("    - "):
                    count += 1
                elif not item.startswith("      "):  # a long item folded onto the next line
                    break
            return count
    return None


def read_composed(text: str) -> Composed:
    lines = text.splitlines()
    kept = [block for name, block in _top_level_blocks(lines) if name != "hydra"]
    verl = "".join(line + "\n" for block in kept for line in block)
    return Composed(verl_config=verl, overrides=count_task_overrides(lines))


def summarise(run_dir: Path, log_file: Path, *, in_log: bool) -> tuple[int | None, Path]:
    """(overrides Hydra applied, where the full config is) after a successful dry run.

    ``in_log``: the job ran where this machine's files are not (an uploaded
    bundle), so its standard output is in the job log, not in the record.
    """
    from tutorrl._files import write_new

    if in_log:
        text = log_file.read_text(encoding="utf-8", errors="replace") if log_file.is_file() else ""
        return count_task_overrides(text.splitlines()), log_file
    raw = run_dir / RAW_FILE
    text = raw.read_text(encoding="utf-8", errors="replace") if raw.is_file() else ""
    composed = read_composed(text)
    if not composed.verl_config:
        return composed.overrides, raw
    target = run_dir / CONFIG_FILE
    write_new(target, composed.verl_config.encode("utf-8"))
    return composed.overrides, target


def proof_lines(*, release: str, overrides: int | None, roots: list[str], passthrough: list[str],
                evidence_hook: bool, gpus: int, uploaded: bool) -> list[str]:
    """What a successful dry run proved, and what it did not: two lines.

    Derived from what it runs. tutorrl verified the bundle and submitted it as a
    Ray job; launch.sh ran in the job's Python (its checks: verl's version, the
    passthrough variables, the roots, the evidence hook's import); verl's
    ``main_ppo`` composed its config with Hydra and printed it. With ``--cfg``
    Hydra returns before verl's task function runs, so verl's own start-up
    (``validate_config``, its config dataclasses, ray.init, the workers) never
    ran, and the printed config keeps its ``${...}`` unresolved. The GPU,
    training-stack, data, model and reward checks of preflight are notes in a
    dry run, not checks.
    """
    where = "from Ray's copy of the bundle" if uploaded else "from this machine's files"
    proved = ["the bundle's files match its manifest",
              f"Ray ran its launch.sh as a job, {where}, and launch.sh found verl {release} in the job's Python"]
    if passthrough:
        proved.append(f"the passthrough variables reached the job ({', '.join(passthrough)})")
    if roots:
        proved.append(f"the roots resolved ({', '.join(roots)})")
    if evidence_hook:
        proved.append("the job's Python can run tutorrl's evidence hook")
    count = f"all {overrides} overrides" if overrides is not None else "every override"
    proved.append(f"verl's Hydra composed its config with {count}: each key exists in verl {release}'s "
                  "config (or is added with '+'), none refused")
    not_proved = [
        "verl's own checks of that config at start (its trainer never started: batch sizes that must divide, "
        "engine settings; the ${...} references are left unresolved)",
        f"the {gpus} GPU(s) it needs (not checked) and that the model fits their memory",
        "that the training stack imports (verl's trainer, the rollout engine's server)",
        "the data, the model and the reward function (not read or imported)",
        "that the rollout engine starts and the workers come up",
    ]
    return ["proved: " + "; ".join(proved), "not proved (a real run's first minutes show these): " + "; ".join(not_proved)]
