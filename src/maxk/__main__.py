import sys

from maxk.cli import main

sys.exit(main())
