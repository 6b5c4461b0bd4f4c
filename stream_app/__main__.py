import sys

from stream_app.cli.main import main

sys.exit(main())
