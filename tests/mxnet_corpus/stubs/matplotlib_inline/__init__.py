"""Headless stand-in for matplotlib_inline."""
