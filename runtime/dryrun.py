"""What a dry run leaves in its run record, and the summary printed for it.

A dry run starts ``launch.sh --cfg all``: verl's own Hydra composes the config
with every override and prints it -- Hydra's own section (``hydra:``, which
lists the overrides it applied under ``hydra.overrides.task``) and then verl's
-- without training. When the job sees this machine's files, its standard
output goes straight to ``runs/<run-id>/hydra-cfg-all.yaml`` (the job log keeps
standard error: warnings, and verl's message when it refuses an override), and
tutorrl writes verl's part alone to ``verl-config.yaml``: the full config verl
would train with, the same text ``--cfg job`` prints. The terminal gets a
three-line summary instead of a thousand lines of config.

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
