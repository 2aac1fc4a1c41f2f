//! Integration tests of type and shape inference (`onnx_schema::infer`): every ONNX backend
//! node test model against its declared output types, the development models under
//! `../shared/models` against theirs (symbolic dims included), symbolic shape arithmetic, and
//! per-op rules and errors on hand-built nodes.

mod backend;
mod compare;
mod contrib;
mod control;
mod models;
mod ops;
mod robustness;
mod support;
mod symbolic;
