"""The supervisor of a detached run: ``python -m tutorrl.runtime.supervise <run dir> <options>``.

``tutorrl run --detach`` starts it in its own session (so closing the shell or
its terminal does not reach it), with its output in ``runs/<run-id>/supervisor.log``.
It does what a foreground ``tutorrl run`` does after the local checks: start
the embedded head (its child, so PR_SET_PDEATHSIG still ties the head to it)
or reach the cluster, submit, follow until the job ends, close the record,
scan for evidence, stop the head. ``tutorrl stop`` sends it SIGTERM, which
stops the job and then the head, exactly like Ctrl-C in the foreground.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from tutorrl.errors import TutorrlError
    from tutorrl.runtime.options import RunOptions
    from tutorrl.runtime.progress import Progress
    from tutorrl.runtime.run import RunSession

    run_dir, options = Path(argv[0]), json.loads(argv[1])
    args = RunOptions(bundle=options["bundle"], address=options.get("address"), upload=options.get("upload"),
                      dry_run=bool(options.get("dry_run")), num_gpus=options.get("num_gpus"),
                      trust_digests=bool(options.get("trust_digests")), retries=options.get("retries"),
                      retry_backoff=options.get("retry_backoff"))
    session = RunSession(args, Progress(tty=False))
    try:
        return session.resume(run_dir)
    except TutorrlError as exc:
        print(exc.render(), file=sys.stderr)
        _close(run_dir, "refused", exc.exit_code, exc.render().splitlines()[0] if exc.render() else None)
        return exc.exit_code
    except BaseException as exc:
        _close(run_dir, "failed", 1, f"tutorrl error: {type(exc).__name__}: {exc}"[:500])
        raise


def _close(run_dir: Path, status: str, code: int, message: str | None) -> None:
    """A record the session did not close (it failed before it could) is closed here."""
    from tutorrl.runtime import lifecycle

    try:
        lifecycle.finish(run_dir, status=status, exit_code=code, message=message)
    except Exception:  # noqa: BLE001 - the next `tutorrl runs` reconciles it
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
