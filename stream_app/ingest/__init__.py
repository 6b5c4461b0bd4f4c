"""The input side: lines checked and published as the worker's intake wants them."""
