"""Getting exact environment values through Ray's ``runtime_env.env_vars``.

Ray 2.60 rewrites every env_vars value in each worker it starts
(``ray._private.utils.update_envs``, called from
``RuntimeEnvContext.exec_worker`` in the process that becomes the worker:
the job supervisor, whose environment the entrypoint inherits, and every
actor verl starts)::

    expanded = os.path.expandvars(value)                    # against that worker's os.environ
    result = re.sub(r"\\$\\{[A-Z0-9_]+\\}", "", expanded)    # drop what stayed unexpanded

Neither step has an escape, and the worker's environment is the cluster's,
not ours. Both steps are single-pass, and that gives an exact transport that
needs nothing from the cluster: after every ``$`` of the value insert
``${TUTORRL_NOTHING}`` (a name nobody sets).

* ``expandvars`` finds no variable to expand: each original ``$`` is now
  followed by another ``$``, so it never starts a reference, and
  ``${TUTORRL_NOTHING}`` is unset, so it is left as it is.
* ``re.sub`` then removes exactly the inserted references -- they are the only
  ``${NAME}`` in the string -- and never rescans what it produced, so a
  ``${X}`` of the original value re-forms and stays.

A first design wrote ``$`` as ``${TUTORRL_DOLLAR}`` with ``TUTORRL_DOLLAR=$``
first in env_vars; measured on a separately started head, Ray does not apply
env_vars in submission order, so that transport lost every ``$``.

Values without ``$`` travel untouched. ``TUTORRL_NOTHING`` is reserved: a
bundle or environment that sets it is refused.
"""

from __future__ import annotations

from tutorrl.contract import NOTHING_ENV as NOTHING_VAR  # noqa: E402
_BREAK = "${" + NOTHING_VAR + "}"


def encode_value(value: str) -> str:
    return value.replace("$", "$" + _BREAK)


def encode_env(env: dict[str, str]) -> dict[str, str]:
    """The env_vars mapping to submit; it decodes to ``env`` inside every Ray worker."""
    return {name: encode_value(value) for name, value in env.items()}
