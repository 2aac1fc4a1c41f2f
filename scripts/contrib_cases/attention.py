"""Contrib conformance cases: the attention family."""


def cases():
    return []
