"""Rules: prove rule text in the reference interpreter, and explain where a rule applies.

Rule text is a rule file's: a ``#`` header, then each rule after a ``#`` comment that states
its identity (``rules/README.md`` in the repository describes the language).

>>> import onnx_opt
>>> text = "# My rules.\\n\\n# -(-x) == x\\nrule neg_neg: Neg(Neg(x)) => x\\n"
>>> [(r.rule, r.passed) for r in onnx_opt.rules.check(text)]
[('neg_neg', True)]
"""

from __future__ import annotations

import os
from typing import Any, List, NamedTuple, Union

from . import _native
from ._errors import translate


class RuleResult(NamedTuple):
    """The proof of one rule: whether it passed, on how many random instances it fired, and,
    when it failed, the shrunk instance and the difference."""

    rule: str
    passed: bool
    instances: int
    detail: str


class Site(NamedTuple):
    """A place in a model where a rule's root op occurs, and what the rule did there."""

    site: str
    verdict: str


def check(text: str, origin: str = "<rules>", seed: int = 0) -> List[RuleResult]:
    """Parses and checks rule text against the operator schemas, then proves each rule: both
    sides evaluated in the reference interpreter on random instances. Raises ``RuleError``
    when the text does not parse or check."""
    try:
        results = _native.rules_check(text, origin=origin, seed=seed)
    except _native.NativeError as e:
        raise translate(e) from None
    return [RuleResult(*r) for r in results]


def explain(
    rule: str,
    model: Any,
    *,
    rules: Union[None, str, "os.PathLike[str]", List[Any]] = None,
    rules_text: Union[None, str, dict] = None,
) -> List[Site]:
    """For each site where ``rule`` could apply in ``model``: whether it fired, or which part
    of its pattern or which guard failed. ``rules`` and ``rules_text`` add rules beside the
    built-in ones (the rule explained may be one of them)."""
    from . import _paths, _rules_text, _source

    source, _ = _source(model)
    try:
        sites = _native.rules_explain(
            rule, rules=_paths(rules), rules_text=_rules_text(rules_text), **source
        )
    except _native.NativeError as e:
        raise translate(e) from None
    return [Site(*s) for s in sites]
