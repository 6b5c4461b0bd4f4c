"""The ``stream-app`` command, one module per subcommand."""
