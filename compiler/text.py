"""The text ``tutorrl compile`` (a sweep's table) and ``tutorrl migrate`` print for what the API returned."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tutorrl.compiler.pipeline import Migrated
    from tutorrl.compiler.pipeline.from_files import WrittenLaunch


def migration_text(found: Migrated) -> str:
    m, entry = found.migration, found.entry
    lines = [f"{found.spec}: verl {m.source} -> {m.target} ({m.variant})", ""]
    if entry is not None:
        from tutorrl.compiler.release import find_entry

        point = find_entry(entry)
        lines[-1:] = [f"entry point: {entry}" + (f" (python -m {point.module})" if point else ""), ""]
    sb, sa = m.selection_before, m.selection_after
    if sb is not None and sa is not None and (sb.config_name, sb.select) != (sa.config_name, sa.select):
        lines.append("variant selection:")
        lines.append(f"  --config-name {sb.config_name} {' '.join(sb.select)}".rstrip()
                     + f" -> --config-name {sa.config_name} {' '.join(sa.select)}".rstrip())
        lines.append("")
    changed = [c for c in m.settings if c.status != "same"]
    if changed:
        lines.append("settings that change:")
        for c in changed:
            lines.append(f"  {c.setting} [{c.status}]" + (f" (spec: {c.spec_field})" if c.spec_field != c.setting else ""))
            for text in c.changes:
                lines.append(f"    {text}")
            for label, place in (("before", c.before), ("after", c.after)):
                if place is not None:
                    for text in place.overrides:
                        lines.append(f"    {label}: {text}")
            if c.note:
                lines.append(f"    why: {c.note}")
        lines.append("")
    same = sum(1 for c in m.settings if c.status == "same")
    if m.source == m.target:
        lines.append(f"--to {m.target} is the release it migrates from: nothing moves; the spec's {same} settings "
                     "keep their key, spelling and '+'.")
    else:
        lines.append(f"{same} other settings keep their key, spelling and '+'.")
    lines.append("")
    if m.blockers:
        lines.append(f"before this spec compiles for verl {m.target}:")
        for b in m.blockers:
            lines.append(f"  {b.spec_field}: {b.message}" + (f" ({b.hint})" if b.hint else ""))
    elif m.source == m.target:
        lines.append(f"the spec compiles for verl {m.target} (experiment.verl = \"{m.target}\").")
    else:
        lines.append(f"the spec compiles for verl {m.target} once experiment.verl = \"{m.target}\".")
    return "\n".join(lines) + "\n"


def migration_json(found: Migrated) -> str:
    import msgspec

    m = found.migration
    doc = msgspec.to_builtins(m)
    if found.entry is not None:
        doc["entry"] = found.entry
    doc["compiles"] = m.compiles
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


def points_table(spec: str, launches: list[WrittenLaunch]) -> str:
    """A sweep's points and their bundles, one row each, the swept settings as columns."""
    from tutorrl._files import display_path
    from tutorrl.compiler.spec import shown

    keys = [k for k, _ in launches[0].point or ()]
    rows = [[str(n + 1)] + [shown(v) for _, v in launch.point or ()] + [display_path(launch.folder)]
            for n, launch in enumerate(launches)]
    header = ["point"] + keys + ["bundle"]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = [f"{spec}: a sweep of {len(launches)} points"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    return "\n".join(lines)
