import sys

from stream_app.cli import main

sys.exit(main())
