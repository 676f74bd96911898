"""python -m kit.cli: the kit command."""

import sys

from kit.cli import main

sys.exit(main())
