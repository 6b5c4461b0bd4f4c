import sys

from stream_app.cli import run

sys.exit(run())
