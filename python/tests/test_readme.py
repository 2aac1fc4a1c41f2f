"""The README's Python example runs, and so do the package's docstring examples."""

import doctest
import re
import subprocess
import sys

import onnx_opt
import onnx_opt.rules
from helpers import REPO

README = REPO / "README.md"
HEADING = "## From Python"


def readme_python_block():
    """The first ```python block in the README section under ``## From Python``."""
    text = README.read_text()
    lines = text.splitlines()
    assert HEADING in lines, (
        f"{README} has no heading '{HEADING}' (a line of its own) with the Python example "
        "under it: add the section, with a ```python code block"
    )
    start = lines.index(HEADING) + 1
    # the section runs to the next heading of level 1 or 2 outside a code block
    end, fenced = len(lines), False
    for i in range(start, len(lines)):
        if lines[i].startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,2} ", lines[i]):
            end = i
            break
    section = "\n".join(lines[start:end])
    m = re.search(r"^```(?:python|py)[ \t]*\n(.*?)^```", section, re.S | re.M)
    assert m, f"the section '{HEADING}' of {README} has no ```python code block"
    code = m.group(1)
    assert code.strip()
    return code


def test_readme_python_example_runs(monkeypatch):
    code = readme_python_block()
    assert "import onnx_opt" in code or "from onnx_opt" in code
    if re.search(r"^>>> ", code, re.M):
        # an interactive session: its outputs are checked too
        monkeypatch.chdir(REPO)
        test = doctest.DocTestParser().get_doctest(code, {}, "README.md", str(README), 0)
        runner = doctest.DocTestRunner(verbose=False)
        runner.run(test)
        assert test.examples and runner.failures == 0, f"{runner.failures} README examples failed"
        return
    sentinel = "README example ran to its end"
    # a script: run it in a fresh interpreter from the repository root, where the README's
    # paths are
    r = subprocess.run(
        [sys.executable, "-c", code + f"\nprint({sentinel!r})\n"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"the README example failed:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.rstrip().endswith(sentinel), r.stdout


def test_docstring_examples():
    attempted = 0
    for module in (onnx_opt, onnx_opt.rules):
        result = doctest.testmod(module, verbose=False)
        assert result.failed == 0, f"{module.__name__}: {result.failed} of {result.attempted} examples failed"
        attempted += result.attempted
    assert attempted >= 5, f"only {attempted} docstring examples"
