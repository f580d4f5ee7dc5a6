"""Finding verl checkpoints and checking that each is complete.

verl writes `latest_checkpointed_iteration.txt` with a plain `open().write()`
(no temp file, no fsync) and skips it entirely for async saves, so it is a
hint: the `global_step_N` directories and their contents are the ground truth.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tutorrl._read import ReadError, inside, read_file, read_json
from tutorrl.evidence.schema import Check, RoleLayout, Tracker

TRACKER = "latest_checkpointed_iteration.txt"
_STEP_DIR = re.compile(r"global_step_(\d+)")
_SHARD = re.compile(r"(model|optim|extra_state)_world_size_(\d{1,18})_rank_(\d{1,18})\.pt")
# verl writes the tracker as str(step); its JSON metadata is a few KB.
MAX_TRACKER = 4096
MAX_METADATA = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class StepDir:
    step: int
    path: Path


def read_tracker(root: Path) -> Tracker:
    path = root / TRACKER
    try:
        raw = read_file(path, MAX_TRACKER, name=TRACKER)
    except FileNotFoundError:
        return Tracker(present=False)
    except ReadError as exc:  # a FIFO, directory, symlink or huge file: present, and no step number
        return Tracker(present=True, raw=str(exc)[:200])
    text = raw.decode("utf-8", errors="replace")
    stripped = text.strip()
    # int() also accepts "+4" or "4_0"; verl only ever writes str(int).
    return Tracker(present=True, raw=text[:200], step=_step_number(stripped))


def _step_number(digits: str) -> int | None:
    # Steps are stored as 64-bit integers in records; a longer digit string is
    # not a step verl wrote (and int() of thousands of digits is refused by Python).
    return int(digits) if re.fullmatch(r"\d{1,18}", digits) else None


def find_step_dirs(root: Path) -> list[StepDir]:
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        step = step_of(p)
        if step is not None and p.is_dir() and not p.is_symlink():
            found.append(StepDir(step, p))
    return sorted(found, key=lambda s: s.step)


def step_of(path: Path) -> int | None:
    m = _STEP_DIR.fullmatch(path.name)
    return _step_number(m.group(1)) if m else None


def tracker_checks(root: Path, tracker: Tracker, step: int) -> list[Check]:
    if not tracker.present:
        return [Check(id="tracker.agrees", status="skipped",
                      detail=f"no {TRACKER}: verl skips it for async saves, and a run can stop before writing it")]
    if tracker.step is None:
        return [Check(id="tracker.agrees", status="fail", detail=f"{TRACKER} holds {tracker.raw!r}, not a step number")]
    checks: list[Check] = []
    if tracker.step == step:
        checks.append(Check(id="tracker.agrees", status="pass", detail=f"{TRACKER} names step {step}"))
    elif tracker.step > step:
        checks.append(Check(id="tracker.agrees", status="skipped",
                            detail=f"{TRACKER} names the later step {tracker.step}; it only ever names the newest save"))
    else:
        checks.append(Check(id="tracker.agrees", status="fail",
                            detail=f"{TRACKER} names step {tracker.step}, older than {step}: this save did not finish"))
    target = root / f"global_step_{tracker.step}"
    if not target.is_dir():
        checks.append(Check(id="tracker.target_exists", status="fail",
                            detail=f"{TRACKER} names step {tracker.step} but global_step_{tracker.step}/ is missing"))
    return checks


def _role_dirs(step_dir: Path) -> list[Path]:
    roles = []
    for p in sorted(step_dir.iterdir()):
        if not p.is_dir() or p.is_symlink():
            continue
        names = {c.name for c in p.iterdir()}
        if (
            "fsdp_config.json" in names
            or "ckpt_contents.json" in names
            or "dist_ckpt" in names
            or any(_SHARD.fullmatch(n) for n in names)
        ):
            roles.append(p)
    return roles


def _load_json(path: Path) -> tuple[object | None, str | None]:
    try:
        return read_json(path, MAX_METADATA, name=path.name), None
    except FileNotFoundError:
        return None, f"{path.name} missing"
    except ReadError as exc:
        return None, f"unreadable: {exc}"


def _fsdp(role: Path) -> tuple[RoleLayout, list[Check]]:
    cid = f"layout.{role.name}"
    cfg, err = _load_json(role / "fsdp_config.json")
    shards: dict[str, dict[int, set[int]]] = {}
    for p in role.iterdir():
        m = _SHARD.fullmatch(p.name)
        if m and p.is_file() and not p.is_symlink():
            shards.setdefault(m.group(1), {}).setdefault(int(m.group(2)), set()).add(int(m.group(3)))
    shard_files = sum(len(r) for by_world in shards.values() for r in by_world.values())
    problems: list[str] = []
    world = None
    if err:
        problems.append(err)
    elif not isinstance(cfg, dict) or type(cfg.get("world_size")) is not int or cfg["world_size"] < 1:
        problems.append("fsdp_config.json has no positive integer world_size")
    elif cfg["world_size"] > shard_files:
        # Listing the missing ranks of a crafted world_size would be unbounded
        # work; the shard files present bound any honest answer.
        problems.append(f"fsdp_config.json says world_size {cfg['world_size']}, but only {shard_files} "
                        "rank shard file(s) exist")
    else:
        world = cfg["world_size"]
    if world is not None:
        if "model" not in shards:
            problems.append("no model_world_size_*_rank_*.pt shards")
        for kind, by_world in sorted(shards.items()):
            for w, _ranks in sorted(by_world.items()):
                if w != world:
                    problems.append(f"{kind} shards for world size {w}, fsdp_config.json says {world}")
            missing = sorted(set(range(world)) - by_world.get(world, set()))
            if missing:
                problems.append(f"{kind}_world_size_{world}_rank_{{{','.join(map(str, missing))}}}.pt missing")
            empty = [r for r in by_world.get(world, ()) if (role / f"{kind}_world_size_{world}_rank_{r}.pt").stat().st_size == 0]
            if empty:
                problems.append(f"{kind} shard(s) for rank {sorted(empty)} are empty")
    if not (role / "huggingface").is_dir():
        problems.append("huggingface/ (config and tokenizer, written by rank 0) missing")
    layout = RoleLayout(role=role.name, layout="fsdp", world_size=world)
    if problems:
        return layout, [Check(id=cid, status="fail", detail="FSDP: " + "; ".join(problems))]
    kinds = ", ".join(sorted(shards))
    return layout, [Check(id=cid, status="pass", detail=f"FSDP: all {world} rank shard(s) of {kinds}, fsdp_config.json, huggingface/")]


def _megatron_v2(role: Path) -> tuple[RoleLayout, list[Check]]:
    cid = f"layout.{role.name}"
    doc, err = _load_json(role / "ckpt_contents.json")
    world = doc.get("world_size") if isinstance(doc, dict) and type(doc.get("world_size")) is int else None
    layout = RoleLayout(role=role.name, layout="megatron-v2", world_size=world)
    if err or not isinstance(doc, dict):
        return layout, [Check(id=cid, status="fail", detail=f"Megatron: {err or 'ckpt_contents.json is not an object'}")]
    listed: list[str] = []
    contents = doc.get("contents")
    if not isinstance(contents, dict):
        return layout, [Check(id=cid, status="fail", detail="Megatron: ckpt_contents.json has no contents object")]
    for key, item in sorted(contents.items()):
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            listed.append(item["path"])
        else:
            return layout, [Check(id=cid, status="fail", detail=f"Megatron: contents.{key} has no path")]
    dirs = doc.get("directories")
    if isinstance(dirs, dict):
        listed.extend(k for k in dirs if isinstance(k, str))
    missing = []
    for rel in sorted(set(listed)):
        # A listed path must stay inside the role directory we are hashing
        # (a NUL byte cannot name a file at all: os calls refuse it).
        if "\0" in rel or not inside(role / rel, role):
            return layout, [Check(id=cid, status="fail", detail=f"Megatron: listed path {rel[:200]!r} leaves the checkpoint")]
        if not os.path.exists(role / rel):
            missing.append(rel)
    if missing:
        return layout, [Check(id=cid, status="fail", detail=f"Megatron: {len(missing)} listed but missing: {', '.join(missing[:20])}")]
    return layout, [Check(id=cid, status="pass", detail=f"Megatron: ckpt_contents.json present, all {len(set(listed))} listed path(s) exist")]


def inspect_step(step_dir: Path) -> tuple[list[RoleLayout], list[Check]]:
    """Layout and completeness of one `global_step_N` directory."""
    roles: list[RoleLayout] = []
    checks: list[Check] = []
    role_dirs = _role_dirs(step_dir)
    if not role_dirs:
        checks.append(Check(id="layout.roles", status="fail",
                            detail="no actor/critic directory with a recognised verl FSDP or Megatron layout"))
    for role in role_dirs:
        names = {c.name for c in role.iterdir()}
        if "ckpt_contents.json" in names:
            layout, cs = _megatron_v2(role)
        elif "fsdp_config.json" in names or any(_SHARD.fullmatch(n) for n in names):
            layout, cs = _fsdp(role)
        else:
            layout = RoleLayout(role=role.name, layout="megatron-v1")
            cs = [Check(id=f"layout.{role.name}", status="skipped",
                        detail="Megatron layout of verl <= 0.8 (dist_ckpt/, no ckpt_contents.json): nothing lists what must exist")]
        roles.append(layout)
        checks.extend(cs)
    # The trainer writes data.pt after every worker save returned, just before the tracker.
    if (step_dir / "data.pt").is_file():
        checks.append(Check(id="checkpoint.dataloader_state", status="pass", detail="data.pt present"))
    else:
        checks.append(Check(id="checkpoint.dataloader_state", status="fail",
                            detail="data.pt missing: the trainer writes it after all worker saves, so this save did not finish"))
    return roles, checks
