"""nvidia GPUs (docs/architecture.md)."""
