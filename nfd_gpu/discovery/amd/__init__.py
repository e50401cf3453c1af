"""amd GPUs (docs/architecture.md)."""
