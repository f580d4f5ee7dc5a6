"""The compiler tests' folder on the import path: its sub-folders (release/, spec/, bundle/, pipeline/, the
compiler's own sub-packages) import compiler_helpers from here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
