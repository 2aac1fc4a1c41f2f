//! Integration tests of onnx-opt: one binary, one module per area. The tests that read the
//! shared test data (`../shared`, or `ONNX_OPT_SHARED`) find it with
//! `onnx_testdata::require_shared!`, which skips them when it is absent.

mod cli;
mod convert;
mod fuzz;
mod pipeline;
mod pipelines;
mod rules;
