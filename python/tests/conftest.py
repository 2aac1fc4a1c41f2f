"""Fixtures of the onnx_opt test suite; the helpers are in helpers.py."""

import pathlib

import pytest

from helpers import DEV_BERT, DEV_CNN, dev_model_dir


@pytest.fixture(scope="session")
def dev_cnn() -> pathlib.Path:
    """squeezenet1_0-opset13 (dynamic batch, opset 13) from the shared models."""
    return dev_model_dir(DEV_CNN)


@pytest.fixture(scope="session")
def dev_bert() -> pathlib.Path:
    """bert-tiny-opset17 (int64 inputs, two outputs) from the shared models."""
    return dev_model_dir(DEV_BERT)
