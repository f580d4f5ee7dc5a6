"""The shell function with which an exported job, started again by its launcher, resumes.

Slurm's ``--requeue`` and a SkyPilot managed job's recovery start the same
script again; the function turns the launcher's restart count into launch.sh's
resume arguments, as ``tutorrl run --retries`` does between attempts
(runtime/retry.py), with verl's resume keys as the bundle's release spells them.
"""

from __future__ import annotations

from tutorrl.export.common import REFUSED, Bundle, sh_quote


def resume_keys(bundle: Bundle) -> tuple[str, str, str, str]:
    """launch.sh's arguments for verl ``bundle.verl``'s resume: (the path's key, then resume_mode set to
    resume_path, disable and auto), spelled as the release spells them."""
    from tutorrl.compiler.release import render_value
    from tutorrl.runtime import no_resume_keys, resume_targets

    mode, path = resume_targets(bundle.verl, bundle.variant)
    if mode is None or path is None:
        raise no_resume_keys(bundle.verl, bundle.variant)
    at, scratch, auto = (f"{mode.spelled()}={render_value(v)}" for v in ("resume_path", "disable", "auto"))
    return path.spelled(), at, scratch, auto


def resume_function(bundle: Bundle, retries: int | None, count: str, what: str) -> str:
    """A bash function ``tutorrl_resume_args`` that sets the array ``resume`` to launch.sh's resume
    arguments for a restarted job (shell expression ``count``: how many times it started before; ``what``:
    the launcher's word for it), and stops a job started more than ``retries`` times (None: the launcher
    keeps the count).

    Where the job's Python has tutorrl, the job resumes from the newest checkpoint whose evidence record
    verifies with its files hashed again (export/resume_node.py), or from scratch when none does (verl's
    ``auto`` would take the newest folder, verified or not); elsewhere verl's own ``auto`` resume, and the
    job says that the evidence is not checked."""
    path, at, scratch, auto = resume_keys(bundle)
    return (
        "# tutorrl-resume: the arguments a restarted job gives launch.sh (verl's resume keys).\n"
        "tutorrl_resume_args() {\n"
        f"  local restarts={count} dir\n"
        "  resume=()\n"
        "  [ \"$restarts\" -gt 0 ] || return 0\n"
        + ("" if retries is None else
           f"  if [ \"$restarts\" -gt {retries} ]; then\n"
           f"    echo \"tutorrl: {what} $restarts of at most {retries}; not starting again\" >&2\n"
           "    exit 1\n"
           "  fi\n")
        +
        "  if \"$python_bin\" -c 'import tutorrl.export.resume_node' 2>/dev/null; then\n"
        f"    dir=$(\"$python_bin\" -m tutorrl.export.resume_node \"$bundle\") || exit {REFUSED}\n"
        "    if [ -n \"$dir\" ]; then\n"
        f"      resume=({sh_quote(at)} {sh_quote(path + '=')}\"$dir\")\n"
        "    else\n"
        f"      resume=({sh_quote(scratch)})\n"
        "    fi\n"
        "  else\n"
        f"    echo \"tutorrl: {what} $restarts{'' if retries is None else f' of {retries}'}: $python_bin has no tutorrl, so no checkpoint's evidence is\"\\\n"
        "\" checked; verl resumes from its newest checkpoint folder, whatever its files\" >&2\n"
        f"    resume=({sh_quote(auto)})\n"
        "  fi\n"
        "}\n"
        "# tutorrl-resume-end\n"
    )
