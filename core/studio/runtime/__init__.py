"""Where and how the engine runs: the host it runs in, devices and dtypes, loaded models, chunking, prefetch and writer pools.

Docs: docs/architecture.md (layout).
"""
