"""A safe interpreter for the Go ``text/template`` subset NFD rules use.

How:

- Nothing here calls ``eval`` or ``exec``.
- The template is lexed by lex.py and parsed into a small tree by parse.py and nodes.py.
- exec.py walks the tree with the functions of funcs.py.

Semantics follow Go's ``text/template`` with NFD's options:
``missingkey=error``, and Sprig's text functions minus ``env``, ``expandenv`` and
``getHostByName``.

Supported:

- text, comments, trim markers;
- ``if``, ``else if``, ``else``;
- ``range`` over slices, maps and integers, with one or two variables, ``else``, ``break``
  and ``continue``;
- ``with``, ``else with``, ``else``;
- variable declaration and assignment, pipelines, parenthesised pipelines, field chains;
- the built-in functions and the Sprig functions listed in ``FUNCTIONS``.

``define``, ``template``, ``block`` and ``call`` are rejected with a clear error.

Limits, in limits.py: template source and output are each capped at 64 KiB.
Execution is capped at a fixed number of steps.
So a rule can never hang or flood the agent.

tests/data/template/ is the conformance table.
tests/e2e/test_oracle_template.py checks it against Go's own ``text/template``.
"""

from __future__ import annotations

from nfd_gpu.rules.template.exec import Template, expand_map, parse
from nfd_gpu.rules.template.fmt import go_sprintf
from nfd_gpu.rules.template.lex import lex
from nfd_gpu.rules.template.limits import MAX_OUTPUT_SIZE, TemplateError

# What other modules and the tests import; the rest is reached through its module.
__all__ = [
    "MAX_OUTPUT_SIZE",
    "Template",
    "TemplateError",
    "expand_map",
    "go_sprintf",
    "lex",
    "parse",
]
