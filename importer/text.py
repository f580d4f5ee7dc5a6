"""The text ``tutorrl import`` prints: a report of how each launch became a spec."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tutorrl.importer.launch import ImportReport


def report_text(r: ImportReport) -> str:
    from tutorrl._files import display_path
    from tutorrl.importer.translate import LEFT_OUT

    lines = [f"import: {r.source} -> verl {r.release} ({r.variant}); {r.release_reason}"]
    if r.spec_path:
        lines.append(f"spec: {display_path(Path(r.spec_path))}")
    if r.sandbox:
        lines.append(f"sandbox: {r.sandbox}")
        lines += [f"  {name}: {p['how']}" for name, p in r.confinement.items() if not p["confined"]]
    if r.skipped:
        lines.append("not copied into the sandbox (the script cannot read them):")
        lines += [f"  {s}" for s in r.skipped]
    by: dict[str, list] = {}
    for m in r.mapped:
        by.setdefault(m.how, []).append(m)
    lines.append(f"overrides: {len(by.get('field', []))} to spec fields, {len(by.get('extra', []))} to "
                 f"extra_overrides, {len(by.get('unread', []))} to unread_overrides, {len(by.get('dropped', []))} "
                 f"dropped, {len(by.get('refused', []))} refused")
    moved = [m for m in r.mapped if m.how == "field" and m.note.startswith("the key moved")]
    if moved:
        lines.append("keys the target release spells differently (the spec field writes the new key):")
        lines += [f"  {m.override} -> {m.field}  ({m.note})" for m in moved]
    for how, title in (("extra", "kept as raw overrides (extra_overrides)"),
                       ("unread", "kept as written, never read by the release (unread_overrides)"), ("dropped", "dropped"),
                       ("refused", "refused")):
        # An override the translation left out of the launch is listed once, with what the launch carried.
        listed = [m for m in by.get(how, []) if not m.note.startswith(LEFT_OUT)]
        if listed:
            lines.append(f"{title}:")
            lines += [f"  {m.override}" + (f"  ({m.note})" if m.note else "") for m in listed]
    if r.normalised:
        lines.append("spelling normalised (the '+' follows the release's key set):")
        lines += [f"  {o}" for o in r.normalised]
    if r.unset:
        positional = "; a positional parameter N, $N, with the Nth --arg VALUE" if any(n.isdigit() for n in r.unset) else ""
        lines.append(f"shell variables read but never set (give them with --var NAME=VALUE{positional}):")
        lines += [f"  {name} -> {value}" for name, value in sorted(r.unset.items())]
    if r.other_commands:
        lines.append("other commands the script runs (recorded, not run, not part of the spec):")
        lines += [f"  {c}" for c in r.other_commands]
    if r.roots:
        lines.append("roots (folders of this machine, named so the spec runs elsewhere; set them in the job's "
                     "environment there):")
        lines += [f"  {name} = {value!r} (default)" for name, value in sorted(r.roots.items())]
    if r.clock:
        lines.append("clock reads (the capture answers a fixed instant; the spec keeps that value):")
        lines += [f"  {c}" for c in r.clock]
    if r.other_releases:
        lines.append(f"release: {r.other_releases}")
    for note in r.notes:
        lines.append(f"note: {note}")
    if r.warnings:
        lines.append("compiling the spec warns (the launch is still the script's):")
        lines += [f"  {w}" for w in r.warnings]
    if r.does_not_compile:
        lines.append("the spec does not compile until you change (the launch as written has the same problems):")
        lines += [f"  {p}" for p in r.does_not_compile]
    if r.carried:
        lines.append("carried to what the release reads now, where its entry point's config moved a key or verl "
                     "retired one (verl refuses the launch as written; the round trip's reference is the launch so "
                     "carried):")
        lines += [f"  {c}" for c in r.carried]
    if r.exact:
        lines.append(f"round trip: exact (the spec composes to the identical verl {r.release} config"
                     + (" as the launch so carried)" if r.carried else ")"))
    elif r.not_checked:
        lines.append(f"round trip: not checked: {r.not_checked}")
    else:
        lines.append(f"round trip: {len(r.differences)} key(s) differ:")
        for d in r.differences[:50]:
            if d.only_in:
                lines.append(f"  {d.key}: only in the {d.only_in} launch")
            else:
                lines.append(f"  {d.key}: original {d.original!r}, imported {d.imported!r}")
    from tutorrl._text import printable

    # Nearly every line quotes the script (its commands, overrides, values): a terminal escape in it
    # is shown escaped, and a line break inside one item cannot pass for a line of the report.
    return "\n".join(printable(line).replace("\n", "\\n") for line in lines)
