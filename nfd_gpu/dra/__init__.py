"""The bridge to Kubernetes DRA (docs/dra.md): ``preview.py``, the devices each vendor's
DRA driver would publish for a node, from nfd-gpu's facts (``scan --format
dra-preview``); ``cookbook.py``, the CEL that selects what each neutral label promises;
``docs.py``, docs/dra.md generated from the cookbook. Nothing here talks to the API."""
