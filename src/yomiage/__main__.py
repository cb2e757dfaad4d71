import sys

from yomiage.cli import main

sys.exit(main())
