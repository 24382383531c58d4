"""Headless stand-in for ``IPython.display``: showing figures does nothing."""


def display(*objects, **kwargs):
    return None


def clear_output(wait=False):
    return None


def set_matplotlib_formats(*formats, **kwargs):
    return None
