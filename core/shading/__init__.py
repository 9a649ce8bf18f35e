"""Shading: relighting and normal-map convention conversions (pure tensor functions). Import submodules directly."""
