import sys

from imm_action.cli import main

sys.exit(main())
