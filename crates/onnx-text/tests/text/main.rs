//! Integration tests of onnx-text: the round trip over every shared model, the expected
//! printed files under `tests/data`, the syntax and its extensions, and parse errors.

mod corpus;
mod errors;
mod expected;
mod onnx_parser;
mod syntax;
mod util;
