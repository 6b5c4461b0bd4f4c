"""Turn pipeline: LLM messages and developer decisions in, one Turn per inference call out."""

__version__ = "0.1.0"
