"""The bridge to Kubernetes DRA; see docs/dra.md. Nothing here talks to the API.

- ``preview.py``: the devices each vendor's DRA driver would publish for a node, from
  nfd-gpu's facts. It backs ``scan --format dra-preview``.
- ``cookbook.py``: the CEL that selects what each neutral label promises.
- ``docs.py``: docs/dra.md, generated from the cookbook.
"""
