"""The staleness gate: every spec's committed bundle is what the spec compiles to now.

A spec edited without recompiling would make the committed bundle -- the thing
reviewed -- a lie about what runs. A bundle no spec produces any more is a
leftover that confuses review. Both fail the gate, with the diff that explains
the staleness and the command that fixes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tutorrl._files import display_path
from tutorrl.compiler.bundle import MANIFEST
from tutorrl.errors import TutorrlError
from tutorrl.review.model import Diff, diff_sides
from tutorrl.review.sides import Side, bundle_side, spec_side

DEFAULT_SPECS = "specs"
DEFAULT_BUNDLES = "bundles"


@dataclass
class SpecResult:
    spec: str
    bundle: str  # where its bundle must be
    state: str  # "ok" | "missing" | "invalid" | "error"
    message: str = ""
    diff: Diff | None = None  # against the bundle it most likely replaces


@dataclass
class CheckReport:
    specs: list[SpecResult] = field(default_factory=list)
    orphans: list[tuple[str, str]] = field(default_factory=list)  # (bundle, what it was)
    bundle_errors: list[tuple[str, str]] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if any(r.state == "error" for r in self.specs) or self.bundle_errors or any(
                r.state == "invalid" for r in self.specs):
            return 2
        if any(r.state != "ok" for r in self.specs) or self.orphans:
            return 1
        return 0


def _spec_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.toml")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


def _bundle_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    # Dot-folders are a compile in progress (write_bundle's temporary folder).
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _size(d: Diff) -> int:
    return (len(d.experiment) + len(d.resources) + len(d.reward) + len(d.environment)
            + len(d.extra_overrides) + len(d.spec_only) + (d.release is not None))


def run_check(specs: str | Path = DEFAULT_SPECS, bundles: str | Path = DEFAULT_BUNDLES) -> CheckReport:
    specs_root, bundles_root = Path(specs), Path(bundles)
    if not specs_root.is_dir():
        raise TutorrlError(f"{specs}: no such spec folder (give --specs)")
    report = CheckReport()
    compiled: list[tuple[Path, Side]] = []
    for path in _spec_files(specs_root):
        try:
            side = spec_side(path.read_bytes(), display_path(path))
        except TutorrlError as exc:
            report.specs.append(SpecResult(display_path(path), "", "error", exc.render()))
            continue
        compiled.append((path, side))
    wanted = {side.manifest.id for _, side in compiled}

    # Orphans are read once: they are both reported and the likely "before"
    # of a stale spec.
    orphans: list[Side] = []
    for folder in _bundle_dirs(bundles_root):
        if folder.name in wanted:
            continue
        if not (folder / MANIFEST).exists():
            report.orphans.append((display_path(folder), "not a bundle (no manifest.json)"))
            continue
        try:
            side = bundle_side(folder, display_path(folder))
        except TutorrlError as exc:
            report.bundle_errors.append((display_path(folder), exc.render()))
            continue
        orphans.append(side)
        report.orphans.append((display_path(folder), f"experiment {side.manifest.experiment}, verl {side.manifest.verl}"))

    out_flag = "" if display_path(bundles_root) == DEFAULT_BUNDLES else f" --out {display_path(bundles_root)}"
    for path, side in compiled:
        folder = bundles_root / side.manifest.id
        result = SpecResult(side.label, display_path(folder), "ok")
        if folder.is_dir():
            try:
                bundle_side(folder, display_path(folder))
            except TutorrlError as exc:
                result.state, result.message = "invalid", exc.render()
                report.fix.append(f"rm -r {display_path(folder)} && tutorrl compile {side.label}{out_flag}")
        else:
            result.state = "missing"
            before = [o for o in orphans if o.manifest.experiment == side.manifest.experiment]
            if before:
                diffs = [diff_sides(o, side) for o in before]
                result.diff = min(diffs, key=_size)
                result.message = f"the committed {result.diff.old.label} is stale; what changed:"
            else:
                result.message = "no bundle of this experiment is committed"
            report.fix.append(f"tutorrl compile {side.label}{out_flag}")
        report.specs.append(result)
    if report.orphans:
        report.fix.append("rm -r " + " ".join(o for o, _ in report.orphans))
    return report


def report_json(report: CheckReport) -> str:
    """The report as JSON: what a CI step or an editor integration reads."""
    import msgspec

    doc = {
        "ok": report.exit_code == 0,
        "exit_code": report.exit_code,
        "specs": [{"spec": r.spec, "bundle": r.bundle or None, "state": r.state if r.diff is None else "stale",
                   "message": r.message or None,
                   "diff": msgspec.to_builtins(r.diff) if r.diff is not None else None}
                  for r in report.specs],
        "orphans": [{"bundle": b, "what": what} for b, what in report.orphans],
        "bundle_errors": [{"bundle": b, "message": m} for b, m in report.bundle_errors],
        "fix": list(report.fix),
    }
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


def format_report(report: CheckReport, color: bool = False) -> str:
    from tutorrl.review.render import render

    def paint(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color else text

    lines: list[str] = []
    for r in report.specs:
        if r.state == "ok":
            lines.append(f"{paint('ok', '32')}      {r.spec} -> {r.bundle}")
        elif r.state == "error":
            lines.append(f"{paint('error', '31')}   {r.spec} does not compile:")
            lines += ["  " + line for line in r.message.splitlines()]
        elif r.state == "invalid":
            lines.append(f"{paint('error', '31')}   {r.spec}: its bundle {r.bundle} does not verify:")
            lines += ["  " + line for line in r.message.splitlines()]
        else:
            label = "stale  " if r.diff is not None else "missing"
            lines.append(f"{paint(label, '31')} {r.spec}: compiles to {r.bundle}, which is missing; {r.message}")
            if r.diff is not None:
                lines += ["  " + line if line else "" for line in render(r.diff, "text", color).splitlines()]
    for folder, what in report.orphans:
        lines.append(f"{paint('orphan', '31')}  {folder} ({what}): no spec compiles to it")
    for folder, message in report.bundle_errors:
        lines.append(f"{paint('error', '31')}   {folder} does not verify:")
        lines += ["  " + line for line in message.splitlines()]
    n = len(report.specs)
    if report.exit_code == 0:
        lines.append(f"{n} spec{'s' if n != 1 else ''}: every bundle is up to date")
    else:
        if report.fix:
            lines.append("")
            lines.append("to fix:")
            lines += [f"  {cmd}" for cmd in report.fix]
    return "\n".join(lines) + "\n"
