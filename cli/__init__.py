"""Command-line interface: `sapiens2 predict|download|info`."""
