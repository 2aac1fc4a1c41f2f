"""Contrib conformance cases: the norm family."""


def cases():
    return []
