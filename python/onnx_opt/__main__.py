"""``python -m onnx_opt`` and the ``onnx-opt`` command: the same command line as the Rust
binary (``onnx-opt --help``), run in this process."""

import sys

from . import _native


def main() -> None:
    """Runs the command line on ``sys.argv`` and exits with its code."""
    sys.stdout.flush()
    raise SystemExit(_native.cli(["onnx-opt", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
