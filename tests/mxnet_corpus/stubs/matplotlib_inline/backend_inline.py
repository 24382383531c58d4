"""Headless stand-in for ``matplotlib_inline.backend_inline``."""


def set_matplotlib_formats(*formats, **kwargs):
    return None
