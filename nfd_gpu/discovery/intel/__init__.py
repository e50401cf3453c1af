"""intel GPUs (docs/architecture.md)."""
