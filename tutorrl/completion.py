"""``tutorrl completion bash|zsh``: a shell completion script generated from the parser.

The script is data walked out of the argparse parser (every command, verb,
option and choice), wrapped in a small fixed function per shell, so it never
falls behind the commands. ``tutorrl`` builds only the invoked command's
parser to start fast; this command builds all of them, and only when asked.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field


@dataclass
class Node:
    """One level of the command tree: ``tutorrl``, ``tutorrl keys``, ``tutorrl keys import``..."""

    help: str = ""
    options: dict[str, tuple[str, ...] | None] = field(default_factory=dict)  # option -> choices; None: a flag
    takes_value: set[str] = field(default_factory=set)
    children: dict[str, "Node"] = field(default_factory=dict)
    positional_choices: tuple[str, ...] = ()  # e.g. `completion bash|zsh`
    # Words offered beside file names for the first positional (`evidence keygen|anchor|BUNDLE`):
    # an action's ``completion_words``.
    words: tuple[str, ...] = ()


def walk(parser: argparse.ArgumentParser, help: str = "") -> Node:
    node = Node(help=help)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, child in action.choices.items():
                node.children[name] = walk(child, helps.get(name, ""))
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if not action.option_strings:
            if action.choices and not node.positional_choices:
                node.positional_choices = tuple(str(c) for c in action.choices)
            elif getattr(action, "completion_words", None) and not node.words:
                node.words = tuple(action.completion_words)
            continue
        for opt in action.option_strings:
            node.options[opt] = tuple(str(c) for c in action.choices) if action.choices else None
            if action.nargs != 0:
                node.takes_value.add(opt)
    return node


def _paths(node: Node, path: tuple[str, ...] = ()):
    yield path, node
    for name, child in node.children.items():
        yield from _paths(child, (*path, name))


def _q(text: str) -> str:
    """Single-quoted for both shells."""
    return "'" + text.replace("'", "'\\''") + "'"


def _case(function: str, rows: list[tuple[str, str]], default: str = "") -> str:
    lines = [f"{function}() {{", '  case "$1" in']
    lines += [f"    {_q(key)}) {value} ;;" for key, value in rows]
    if default:
        lines.append(f"    *) {default} ;;")
    lines += ["  esac", "}"]
    return "\n".join(lines)


def _tables(tree: Node, prefix: str) -> str:
    """Shell functions that answer: sub-commands of a path, its options, which
    option takes a value, and an option's choices (POSIX case, so the same
    text serves bash and zsh)."""
    subs, opts, values, choices, words = [], [], [], [], []
    for path, node in _paths(tree):
        key = " ".join(path)
        if node.children:
            subs.append((key, f"echo {_q(' '.join(node.children))}"))
        elif node.positional_choices:
            # Offered like sub-commands: a word from a fixed set.
            subs.append((key, f"echo {_q(' '.join(node.positional_choices))}"))
        if node.words:
            words.append((key, f"echo {_q(' '.join(node.words))}"))
        opts.append((key, f"echo {_q(' '.join(sorted(node.options)))}"))
        for opt in sorted(node.takes_value):
            values.append((f"{key}|{opt}", "return 0"))
            if node.options[opt]:
                choices.append((f"{key}|{opt}", f"echo {_q(' '.join(node.options[opt]))}"))
    return "\n\n".join([
        _case(f"_{prefix}_subcommands", subs),
        _case(f"_{prefix}_options", opts),
        _case(f"_{prefix}_takes_value", values, default="return 1"),
        _case(f"_{prefix}_choices", choices),
        _case(f"_{prefix}_words", words),
    ])


# Walks the words before the cursor: options (and the value of those that take
# one) are skipped, and each word naming a sub-command of the path so far
# extends it. Sets <prefix>_path and <prefix>_prev_takes ("" or the option
# whose value is being typed) and <prefix>_npos (how many positional words
# follow the path).
_SCAN = """\
_{p}_scan() {{
  local i w subs
  {p}_path=""
  {p}_prev_takes=""
  {p}_npos=0
  i=1
  while [ "$i" -lt "$1" ]; do
    eval "w=\\${{{p}_words[$i]}}"
    case "$w" in
      --*=*) ;;
      -*)
        if _{p}_takes_value "${{{p}_path}}|$w"; then
          if [ $((i + 1)) -eq "$1" ]; then {p}_prev_takes="$w"; fi
          i=$((i + 1))
        fi ;;
      *)
        subs=" $(_{p}_subcommands "${{{p}_path}}") "
        case "$subs" in
          *" $w "*) {p}_path="${{{p}_path:+${{{p}_path}} }}$w"; {p}_npos=0 ;;
          *) {p}_npos=$(({p}_npos + 1)) ;;
        esac ;;
    esac
    i=$((i + 1))
  done
}}
"""

_BASH = """\
# bash completion for tutorrl (generated by `tutorrl completion bash`).
# Load it with:  source <(tutorrl completion bash)
{tables}

{scan}
_{p}() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" subs {p}_path {p}_prev_takes {p}_npos
  local -a {p}_words=("${{COMP_WORDS[@]}}")
  _{p}_scan "$COMP_CWORD"
  COMPREPLY=()
  if [ -n "${p}_prev_takes" ]; then
    local choices
    choices="$(_{p}_choices "${{{p}_path}}|${p}_prev_takes")"
    if [ -n "$choices" ]; then
      COMPREPLY=($(compgen -W "$choices" -- "$cur"))
    else
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
  fi
  case "$cur" in
    -*) COMPREPLY=($(compgen -W "$(_{p}_options "${{{p}_path}}")" -- "$cur")); return 0 ;;
  esac
  subs="$(_{p}_subcommands "${{{p}_path}}")"
  if [ -n "$subs" ]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
    if [ "${p}_npos" -eq 0 ]; then
      COMPREPLY+=($(compgen -W "$(_{p}_words "${{{p}_path}}")" -- "$cur"))
    fi
  fi
}}

complete -F _{p} tutorrl
"""

_ZSH = """\
#compdef tutorrl
# zsh completion for tutorrl (generated by `tutorrl completion zsh`).
# Load it with:  source <(tutorrl completion zsh)   (after compinit), or save it
# as _tutorrl in a folder on $fpath.
{tables}

_{p}_describe_subcommands() {{
  case "$1" in
{describe}
  esac
}}

{scan}
# What to offer for word number $1 (0 = "tutorrl") of the words that follow:
# one candidate per line, or the line "@files" for file names (then any words
# offered beside them, one per line).
# ksharrays makes zsh index arrays from 0, as bash does, so the scanner is shared.
_{p}_candidates() {{
  setopt localoptions ksharrays
  local cword="$1" cur subs choices {p}_path {p}_prev_takes {p}_npos
  shift
  local -a {p}_words
  {p}_words=("$@")
  cur="${{{p}_words[$cword]}}"
  _{p}_scan "$cword"
  if [ -n "${p}_prev_takes" ]; then
    choices="$(_{p}_choices "${{{p}_path}}|${p}_prev_takes")"
    if [ -n "$choices" ]; then print -l -- ${{=choices}}; else print -- "@files"; fi
    return 0
  fi
  case "$cur" in
    -*) print -l -- ${{=$(_{p}_options "${{{p}_path}}")}}; return 0 ;;
  esac
  subs="$(_{p}_subcommands "${{{p}_path}}")"
  if [ -n "$subs" ]; then print -l -- ${{=subs}}; return 0; fi
  print -- "@files"
  if [ "${p}_npos" -eq 0 ]; then
    subs="$(_{p}_words "${{{p}_path}}")"
    if [ -n "$subs" ]; then print -l -- ${{=subs}}; fi
  fi
}}

_{p}() {{
  local -a cands described
  local line
  cands=("${{(@f)$(_{p}_candidates $((CURRENT - 1)) "${{words[@]}}")}}")
  if [ "${{cands[1]}}" = "@files" ]; then
    if (( ${{#cands}} > 1 )); then compadd -- "${{(@)cands[2,-1]}}"; fi
    _files
    return
  fi
  if [[ "${{words[CURRENT]}}" != -* ]]; then
    for line in "${{cands[@]}}"; do
      described+=("$(_{p}_describe_subcommands "$line")")
    done
    if [ -n "${{described[1]}}" ]; then
      _describe -t commands 'tutorrl command' described
      return
    fi
  fi
  compadd -- "${{cands[@]}}"
}}

if (( $+functions[compdef] )); then
  compdef _{p} tutorrl
fi
"""


def script(shell: str, parser: argparse.ArgumentParser | None = None) -> str:
    if parser is None:
        from tutorrl.cli import build_parser

        parser = build_parser()
    tree = walk(parser)
    p = "tutorrl"
    tables = _tables(tree, p)
    scan = _SCAN.format(p=p)
    if shell == "bash":
        return _BASH.format(p=p, tables=tables, scan=scan)
    describe = "\n".join(f"    {_q(name)}) echo {_q(name + ':' + (child.help or name))} ;;"
                         for _, node in _paths(tree) for name, child in node.children.items())
    return _ZSH.format(p=p, tables=tables, describe=describe, scan=scan)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "completion", help="print a shell completion script (bash or zsh)",
        description="Print a completion script for every tutorrl command, option and choice. "
                    "bash: `source <(tutorrl completion bash)` (e.g. in ~/.bashrc); "
                    "zsh: `source <(tutorrl completion zsh)` after compinit.")
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell")
    p.set_defaults(handler=_completion)


def _completion(args) -> int:
    import sys

    sys.stdout.write(script(args.shell))
    return 0
