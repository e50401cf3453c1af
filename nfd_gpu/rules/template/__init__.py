"""A safe interpreter for the Go ``text/template`` subset NFD rules use.

Nothing here calls ``eval``/``exec``: the template is lexed (lex.py), parsed into a
small tree (parse.py, nodes.py) and walked (exec.py) with the functions of funcs.py.
Semantics follow Go's ``text/template`` with NFD's options (``missingkey=error``;
Sprig's text functions minus ``env``, ``expandenv`` and ``getHostByName``).
Supported: text, comments, trim markers, ``if``/``else if``/``else``, ``range``
(slices, maps, integers; one or two variables, ``else``, ``break``, ``continue``),
``with``/``else with``/``else``, variable declaration and assignment, pipelines,
parenthesised pipelines, field chains, the built-in functions and the Sprig functions
listed in ``FUNCTIONS``. ``define``, ``template``, ``block`` and ``call`` are rejected
with a clear error. Template source and output are each capped at 64 KiB, and
execution at a fixed number of steps, so a rule can never hang or flood the agent
(limits.py). tests/data/template/ is the conformance table, checked against Go's own
``text/template`` by tests/e2e/test_oracle_template.py.
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
