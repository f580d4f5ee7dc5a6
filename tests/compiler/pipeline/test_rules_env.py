"""The environment-name rules, against their statement as regular expressions.

rules.py matches names with sets, prefixes and suffixes (a cold compile no
longer compiles two long patterns); the patterns below are how the rules are
stated, and every name must get the same answer from both.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tutorrl.compiler.pipeline.rules import looks_secret, takes_over

TAKEOVER = re.compile(r"^(PATH|BASH_ENV|ENV|IFS|CDPATH|GLOBIGNORE|EXECIGNORE|POSIXLY_CORRECT|PS4|PROMPT_COMMAND|"
                      r"BASH_.+|LD_.+|DYLD_.+|GCONV_PATH|OPENSSL_CONF|OPENSSL_ENGINES|PYTHON.*|PERL5?LIB|PERL5OPT|"
                      r"RUBYLIB|RUBYOPT|NODE_OPTIONS|NODE_PATH|JAVA_TOOL_OPTIONS|RAY_RUNTIME_ENV_HOOK|HOME|GLIBC_TUNABLES|"
                      r"LOCPATH|VERL_USE_EXTERNAL_MODULES)\Z")
SECRET_TAIL = re.compile(r"((API|AI|ACCESS|SSH|PRIVATE|SIGNING|SESSION|MASTER|ENCRYPTION)KEY|TOKEN|PASSWD|PASSWORD|"
                         r"PASSPHRASE|SECRET|CREDENTIALS?)[0-9]*\Z")
PIECES = ["PATH", "BASH", "_", "LD", "DYLD", "PYTHON", "PERL", "5", "LIB", "OPT", "RUBY", "NODE", "ENV", "X", "1",
          "TOKEN", "KEY", "API", "AI", "SSH", "SECRET", "CREDENTIAL", "S", "PASSWD", "PASSWORD", "PASSPHRASE", "IFS",
          "PS4", "GCONV", "OPENSSL", "CONF", "RAY", "HOOK", "HOME", "GLIBC", "TUNABLES", "LOC", "VERL", "USE", "EXTERNAL",
          "MODULES", "token", "Key", "a", "0", "MONKEY", "AUTH"]
NAMES = st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join).filter(
    lambda n: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) is not None)


@settings(max_examples=3000, deadline=None)
@given(NAMES)
def test_takeover_names_as_stated(name):
    assert takes_over(name) == bool(TAKEOVER.match(name))


@settings(max_examples=3000, deadline=None)
@given(NAMES)
def test_secret_tails_as_stated(name):
    import tutorrl.compiler.pipeline.rules as rules

    by_tail = name.upper().rstrip("0123456789").endswith(rules._SECRET_TAIL)
    assert by_tail == bool(SECRET_TAIL.search(name.upper()))


def test_known_answers():
    assert takes_over("PYTHON") and takes_over("PYTHONPATH") and takes_over("LD_PRELOAD") and takes_over("PERL5LIB")
    assert takes_over("VERL_USE_EXTERNAL_MODULES") and not takes_over("VERL_USE_EXTERNAL_PLUGINS")
    assert not takes_over("BASH_") and not takes_over("LD_") and not takes_over("PATHS") and not takes_over("MYPATH")
    assert looks_secret("DBPASSWORD") and looks_secret("OPENAI_API_KEY") and looks_secret("SSHKEY2")
    assert not looks_secret("MONKEY") and not looks_secret("PWD")


@settings(max_examples=300, deadline=None)
@given(part=st.text(st.sampled_from("AZKEYazk09É_é"), max_size=10))
def test_a_names_words_are_the_patterns_words_with_or_without_it(part):
    # A part in capitals alone is split without the pattern (a share of a cold compile): the same words.
    from tutorrl.compiler.pipeline import rules

    assert rules._words(part) == re.findall(rules._WORDS, part)
