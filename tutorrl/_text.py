"""Text shown to a person: what a value quoted in a message may contain."""

_UNSAFE = {c: f"\\x{c:02x}" for c in range(32) if c not in (9, 10)} | {0x7F: "\\x7f"} | {
    c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}


def printable(text: str) -> str:
    """``text`` with control and bidirectional-override characters escaped: a
    value quoted in an error message cannot move the cursor, recolour the
    terminal, or reorder what the user reads."""
    return text.translate(_UNSAFE)
