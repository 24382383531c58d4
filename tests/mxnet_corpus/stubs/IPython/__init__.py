"""Headless stand-in for IPython, for running notebook code in the corpus (the real one is used when present)."""


def get_ipython():
    return None


version_info = (8, 0, 0, "")  # what matplotlib checks when IPython is imported
