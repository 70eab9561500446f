"""The version of msc (recorded in what its codegens write)."""

__version__ = "0.1.0"
