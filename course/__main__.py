import sys

from course.judge.cli import main

sys.exit(main())
