import sys

from grader.judge.cli import main

sys.exit(main())
