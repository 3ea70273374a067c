"""The version of pallas-prof (a module of its own: submodules read it without
importing the package, which imports them)."""
__version__ = "0.1.0"
