"""Reading TOML 1.0: tomli's compiled parser, else the standard library's.

A spec is parsed on every compile, and ``tutorrl check`` parses every spec of
a repository: the standard library's pure-Python ``tomllib`` was a fifth of a
warm compile. tomli -- the same parser, of which ``tomllib`` is a copy --
ships wheels compiled with mypyc that parse a spec about twice as fast and
import no slower. It is a core dependency held below 2.4, the release that
began to read TOML 1.1: a spec is TOML 1.0, what every editor and linter of
the spec reads. Where tomli is missing (a platform without its wheel still
gets it, pure Python, from pip), ``tomllib`` gives the same documents and the
same errors.
"""

try:
    from tomli import TOMLDecodeError, loads
except ImportError:  # pragma: no cover - tomli is a declared dependency
    from tomllib import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
