"""Turns read from a file or the final topic, written as datasets."""
