"""``python -m nfd_gpu.cli``: the ``nfd-gpu`` command."""

import sys

from nfd_gpu.cli import console

sys.exit(console())
