"""The package's version, in a module of its own so that internal code (the recorder's stamp,
the report's footer, ``--version``) does not import the user-facing facade ``pipeline``."""

__version__ = "0.1.0"
