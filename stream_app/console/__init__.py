"""What the commands print on a terminal: progress and summary wording."""
