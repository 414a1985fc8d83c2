import sys

from kernelpin.cli import main

sys.exit(main())
