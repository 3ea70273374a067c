import sys

from pallas_prof.cli.main import main

sys.exit(main())
