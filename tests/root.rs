//! Integration tests of onnx-opt: one binary, one module per area.
