"""Signing evidence records, and judging the signatures a chain carries.

Keys are Ed25519 (`cryptography`, the `sign` extra): the private key a PKCS#8
PEM file the user keeps (`tutorrl evidence keygen`, mode 0600, by default
`$XDG_CONFIG_HOME/tutorrl/evidence-signing-key`, never inside a bundle), the
public key the same path with `.pub` (SubjectPublicKeyInfo PEM, what
`tutorrl verify --trust` takes).

Which key signs: the file `TUTORRL_EVIDENCE_KEY` names, else the default path
when it exists, else none. A key that is named or present but cannot be used
(unreadable, readable by others, not Ed25519, `cryptography` missing) refuses
the record rather than writing it unsigned: a chain never loses its
signatures by accident. With no key at all the record is written unsigned
(an envelope with no signatures), and `tutorrl verify` says so. Only the
path travels to the trainer process, by name in its environment (the
embedded Ray head inherits it); the key bytes are never written anywhere but
the key file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tutorrl._read import ReadError, read_file
from tutorrl.errors import SigningError  # its home; importable from here too
from tutorrl.evidence.schema import DSSE_PAYLOAD_TYPE, Signature
from tutorrl.evidence.statement import Record, pae

from tutorrl.contract import EVIDENCE_KEY_ENV as ENV_KEY  # noqa: E402
DEFAULT_KEY_NAME = "evidence-signing-key"
MAX_KEY_FILE = 64 * 1024
INSTALL_HINT = "install tutorrl's signing extra: pip install 'tutorrl[sign]'"
_PEM_PUBLIC = re.compile(rb"-----BEGIN PUBLIC KEY-----.+?-----END PUBLIC KEY-----", re.DOTALL)


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        return None
    return ed25519, serialization, InvalidSignature


def crypto_available() -> bool:
    return _crypto() is not None


def _need_crypto(what: str):
    mods = _crypto()
    if mods is None:
        raise SigningError(f"{what} needs the 'cryptography' package: {INSTALL_HINT}")
    return mods


def keyid_of(raw_public: bytes) -> str:
    return hashlib.sha256(raw_public).hexdigest()


def default_key_path(environ: Mapping[str, str] = os.environ) -> Path:
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "tutorrl" / DEFAULT_KEY_NAME


@dataclass(frozen=True)
class Signer:
    path: Path
    keyid: str
    public_raw: bytes
    _key: object

    def sign(self, to_sign: bytes) -> Signature:
        return Signature(keyid=self.keyid, publicKey=base64.b64encode(self.public_raw).decode("ascii"),
                         sig=base64.b64encode(self._key.sign(to_sign)).decode("ascii"))


def _raw_public(key, serialization) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def load_signer(path: Path) -> Signer:
    """The private key at `path` (a symlink is followed: secrets are often mounted as one)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SigningError(f"signing key {path}: no such file (create one with `tutorrl evidence keygen`)") from None
    except OSError as exc:
        raise SigningError(f"signing key {path}: cannot read ({exc.strerror})") from None
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
        raise SigningError(f"signing key {path}: readable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                           f"run `chmod 600 {path}`")
    try:
        data = read_file(path, MAX_KEY_FILE, name=f"signing key {path}", follow=True)
    except ReadError as exc:
        raise SigningError(str(exc)) from None
    ed25519, serialization, _ = _need_crypto(f"signing key {path}")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningError(f"signing key {path}: not an unencrypted PEM private key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SigningError(f"signing key {path}: not an Ed25519 key (make one with `tutorrl evidence keygen`)")
    raw = _raw_public(key.public_key(), serialization)
    return Signer(path=Path(path), keyid=keyid_of(raw), public_raw=raw, _key=key)


def configured_key_path(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where the signing key is (not read): `TUTORRL_EVIDENCE_KEY`'s path, else the default when present."""
    named = environ.get(ENV_KEY)
    if named:
        return Path(os.path.abspath(named))
    default = default_key_path(environ)
    return Path(os.path.abspath(default)) if os.path.lexists(default) else None


def find_signer(environ: Mapping[str, str] = os.environ) -> Signer | None:
    """The key that signs new records (see `configured_key_path`), or None when there is none."""
    path = configured_key_path(environ)
    return load_signer(path) if path is not None else None


def _bundle_holding(path: Path) -> Path | None:
    """The bundle folder ``path`` would be written into, if any: a folder holding a
    manifest.json, above the path as written or above where its folder really is
    (a link to a bundle's evidence/ folder once let a key in). Nothing of a
    half-written or damaged bundle is required, so one is never missed."""
    parent = Path(os.path.abspath(path)).parent
    for chain in ([parent, *parent.parents], [real := Path(os.path.realpath(parent)), *real.parents]):
        for folder in chain:
            if os.path.lexists(folder / "manifest.json"):
                return folder
    return None


def generate_key(path: Path) -> Signer:
    """Write a new Ed25519 key to `path` (0600) and its public key to `path.pub`; refuses to overwrite."""
    path = Path(path)
    pub = path.with_name(path.name + ".pub")
    bundle = _bundle_holding(path)
    if bundle is not None:
        raise SigningError(f"{path}: inside bundle {bundle}; a signing key must never travel with the evidence it signs")
    for p in (path, pub):
        if os.path.islink(p):
            # Written through a link, the key lands wherever it points: said as what it is.
            raise SigningError(f"{p}: is a symbolic link; a key is never written through one (give the real path)")
        if os.path.lexists(p):
            raise SigningError(f"{p}: already exists; keys are never overwritten (move it away to make a new one)")
    ed25519, serialization, _ = _need_crypto("tutorrl evidence keygen")
    key = ed25519.Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    from tutorrl._files import fsync_dir, write_new

    created = not path.parent.exists()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if created:
        os.chmod(path.parent, 0o700)
    try:
        write_new(path, private_pem, mode=0o600)
        write_new(pub, public_pem, mode=0o644)
    except FileExistsError as exc:  # raced with another keygen
        raise SigningError(f"{exc.filename}: already exists; keys are never overwritten") from None
    fsync_dir(path.parent)
    raw = _raw_public(key.public_key(), serialization)
    return Signer(path=path, keyid=keyid_of(raw), public_raw=raw, _key=key)


@dataclass(frozen=True)
class TrustedKey:
    keyid: str
    raw: bytes
    source: str


def load_trusted(paths: list[str]) -> list[TrustedKey]:
    """Public keys from files holding one or more PEM public keys (a `.pub`, or several concatenated)."""
    if not paths:
        return []
    ed25519, serialization, _ = _need_crypto("--trust")
    out: list[TrustedKey] = []
    for name in paths:
        try:
            data = read_file(name, MAX_KEY_FILE, name=f"--trust {name}", follow=True)
        except FileNotFoundError:
            raise SigningError(f"--trust {name}: no such file") from None
        except ReadError as exc:
            raise SigningError(str(exc)) from None
        if b"PRIVATE KEY" in data:
            raise SigningError(f"--trust {name}: holds a private key; give its public key ({name}.pub)")
        blocks = _PEM_PUBLIC.findall(data)
        if not blocks:
            raise SigningError(f"--trust {name}: no PEM public key in it (expected a file like the .pub "
                               "`tutorrl evidence keygen` writes)")
        for n, block in enumerate(blocks, 1):
            try:
                key = serialization.load_pem_public_key(block)
            except ValueError as exc:
                raise SigningError(f"--trust {name}: public key {n}: unreadable ({exc})") from None
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise SigningError(f"--trust {name}: public key {n}: not an Ed25519 key")
            raw = _raw_public(key, serialization)
            out.append(TrustedKey(keyid=keyid_of(raw), raw=raw, source=name))
    return out


def signature_problem(sig: Signature, payload: bytes) -> str | None:
    """Why `sig` does not hold over `payload` under the public key it names; None when it does."""
    ed25519, _, InvalidSignature = _need_crypto("checking signatures")
    try:
        raw = base64.b64decode(sig.publicKey, validate=True)
        value = base64.b64decode(sig.sig, validate=True)
    except (binascii.Error, ValueError):
        return "not base64"
    if len(raw) != 32 or keyid_of(raw) != sig.keyid:
        return "its keyid is not its public key's"
    try:
        ed25519.Ed25519PublicKey.from_public_bytes(raw).verify(value, pae(DSSE_PAYLOAD_TYPE, payload))
    except InvalidSignature:
        return "does not verify (edited or forged)"
    return None


def _short(keyid: str) -> str:
    return keyid[:16]


def judge_signatures(records: list[tuple[str, Record]], trusted: list[TrustedKey] | None) -> tuple[list[str], list[str]]:
    """(problems, warnings) about the signatures of `records` (in sequence order).

    With `trusted`, every record needs a valid signature by one of those keys.
    Without, a valid signature by any key passes with a warning (anyone can
    make a key), but an invalid one, or an unsigned record after a signed one
    (tutorrl's writers refuse to drop signing mid-chain), is a problem.
    """
    problems: list[str] = []
    warnings: list[str] = []
    if not any(r.signatures for _, r in records):
        if trusted and records:
            problems.extend(f"{name}: unsigned; --trust requires a signature by a trusted key" for name, _ in records)
        elif records:
            legacy = sum(not r.enveloped for _, r in records)
            warnings.append(f"{len(records)} record(s) unsigned ({legacy} in the pre-signing format): they prove "
                            "nothing about who wrote them (see docs/evidence.md; `tutorrl evidence keygen`)")
        return problems, warnings
    if not crypto_available():
        msg = f"signatures not checked: {INSTALL_HINT}"
        (problems if trusted else warnings).append(msg)
        return problems, warnings
    trusted_raw = {t.raw for t in trusted or []}
    unchecked: set[str] = set()
    unsigned: list[str] = []
    legacy = 0
    last_signed: tuple[str, frozenset[str]] | None = None
    for name, r in records:
        if not r.signatures:
            if trusted:
                problems.append(f"{name}: unsigned; --trust requires a signature by a trusted key")
            elif last_signed is not None:
                problems.append(f"{name}: unsigned, after {last_signed[0]} was signed; tutorrl never appends an "
                                "unsigned record to a signed chain (forged, or written around tutorrl?)")
            else:
                unsigned.append(name)
                legacy += not r.enveloped
            continue
        valid_sigs = []
        for sig in r.signatures:
            why = signature_problem(sig, r.payload)
            if why:
                problems.append(f"{name}: signature by key {_short(sig.keyid)}: {why}")
            else:
                valid_sigs.append(sig)
        valid = {s.keyid for s in valid_sigs}
        # Trust is decided by the key bytes a valid signature was checked with, never by the keyid hint.
        good_trusted = [s for s in valid_sigs if base64.b64decode(s.publicKey) in trusted_raw]
        if trusted and not good_trusted:
            keys = ", ".join(sorted(_short(k) for k in valid)) or "none valid"
            problems.append(f"{name}: not signed by a trusted key (signed by: {keys})")
        elif not trusted:
            unchecked |= valid
        keys = frozenset(valid)
        if last_signed is not None and keys and keys != last_signed[1] and not trusted:
            warnings.append(f"{name}: signed by key {', '.join(sorted(map(_short, keys)))}, {last_signed[0]} by "
                            f"{', '.join(sorted(map(_short, last_signed[1])))} (a new key, or another signer?)")
        if keys:
            last_signed = (name, keys)
    if unsigned:
        span = unsigned[0] + (f" to {unsigned[-1]}" if len(unsigned) > 1 else "")
        old = f"; {legacy} in the pre-signing format" if legacy else ""
        warnings.append(f"{len(unsigned)} record(s) unsigned ({span}{old}), written before a signing key was used")
    if unchecked:
        warnings.append(f"signatures hold, by key(s) {', '.join(sorted(map(_short, unchecked)))}, but no key was "
                        "trusted: give --trust PUBKEY to make a signature prove who wrote a record")
    return problems, warnings
