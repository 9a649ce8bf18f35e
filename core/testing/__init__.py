"""Test helpers that ship with the package but never run in production code paths.

Tests, benchmarks and the docs' examples use them to build tiny checkpoints in the official key layout (real
safetensors files that go through exactly the load path of released weights). Nothing under `core` outside this
package imports it.
"""
