"""Contrib conformance cases: the quant family."""


def cases():
    return []
