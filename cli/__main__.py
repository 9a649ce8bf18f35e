"""`python -m sapiens2_studio.cli` runs the `sapiens2` command."""

import sys

from .main import main

sys.exit(main())
