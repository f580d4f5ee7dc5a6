"""Which run records this user's tutorrl wrote on this machine.

``runs/`` sits outside the bundle digest, and bundles are shared and
committed: a ``run.json`` holds whatever anyone who could write the folder put
there. Yet a record would direct deletion (the embedded head's folder),
signals (its follower, its head) and credentials (``RAY_AUTH_TOKEN`` to its
address, the head's token file to its dashboard). So each record tutorrl
writes is sealed with HMAC-SHA256 under a per-user key that never enters a
bundle: 32 random bytes in a 0600 file in a 0700 state folder
(``$TUTORRL_STATE_HOME``, else ``$XDG_STATE_HOME/tutorrl``, else
``~/.local/state/tutorrl``). A record whose seal does not check is data: it
is shown as recorded, marked as such, and directs nothing.

An HMAC rather than a list of run folders this user started: the folder is
not the danger, its content is, and the content can change after tutorrl
wrote it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from tutorrl.contract import STATE_HOME_ENV as STATE_ENV  # noqa: E402
XDG_ENV = "XDG_STATE_HOME"
KEY_FILE = "record-key"
_PREFIX = "hmac-sha256:"


class StateError(OSError):
    """The state folder or the key is not private to this user; nothing is sealed or trusted with it."""


def state_home() -> Path:
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get(XDG_ENV) or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "tutorrl"


def private_dir(path: Path) -> Path:
    """``path`` as a folder only this user can enter (made 0700, or tightened to it)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise StateError(f"{path}: not a folder of this user; tutorrl keeps its state there")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
            raise StateError(f"{path}: not a private (0600) file of this user; run records are not trusted with it")
        key = os.read(fd, 65)
    finally:
        os.close(fd)
    if len(key) != 32:
        raise StateError(f"{path}: not a tutorrl record key (32 bytes)")
    return key


def key(*, create: bool) -> bytes | None:
    """The user's record key; made on first use when ``create``. Raises ``OSError`` when it cannot be had safely."""
    path = private_dir(state_home()) / KEY_FILE
    found = _read_key(path)
    if found is not None or not create:
        return found
    from tutorrl._files import write_new

    try:
        write_new(path, secrets.token_bytes(32), 0o600)
    except FileExistsError:  # another tutorrl made it between the read and the create
        pass
    return _read_key(path)


def seal(payload: bytes) -> str | None:
    """The seal of ``payload`` under this user's key; None when there is no private place for a key."""
    try:
        k = key(create=True)
    except OSError:
        return None  # the run goes on; later commands will show its record as unverified
    return _PREFIX + hmac.new(k, payload, hashlib.sha256).hexdigest()


def verify(payload: bytes, claimed: object) -> bool:
    if not isinstance(claimed, str) or not claimed.startswith(_PREFIX):
        return False
    try:
        k = key(create=False)
    except OSError:
        return False
    if k is None:
        return False
    return hmac.compare_digest(claimed, _PREFIX + hmac.new(k, payload, hashlib.sha256).hexdigest())
