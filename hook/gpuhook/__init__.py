"""gpuhook: give containers exactly the GPUs they ask for, without privileges."""

__version__ = "0.1.0"
