"""The bounds every template lives within, and the one error type of the package.

A rule can never hang or flood the agent:

- source and output are capped;
- execution counts steps;
- nesting is limited;
- every value a function builds is checked.

docs/reliability.md lists them with their messages.
"""

from __future__ import annotations

MAX_TEMPLATE_SIZE = 64 * 1024
MAX_OUTPUT_SIZE = 64 * 1024
MAX_STEPS = 200_000
# nesting of {{if}}/{{with}}/{{range}} blocks and parenthesised pipelines
MAX_DEPTH = 100
# one value (a string a function returns, a list's length)
MAX_VALUE_SIZE = 64 * 1024
# total size of every string and list the functions of one execution produce
MAX_WORK = 4 * 1024 * 1024


class TemplateError(ValueError):
    """A template that cannot be parsed or executed."""
