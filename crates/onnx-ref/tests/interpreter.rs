//! Integration tests of onnx-ref: the development models reproduce their reference outputs,
//! the ONNX backend conformance suite is tracked by a manifest (an insta snapshot,
//! `interpreter/snapshots/interpreter__conformance__manifest.snap`), and malformed tensors are
//! rejected with errors.

#[path = "interpreter/conformance.rs"]
mod conformance;
#[path = "interpreter/contrib.rs"]
mod contrib;
#[path = "interpreter/control.rs"]
mod control;
#[path = "interpreter/models.rs"]
mod models;
#[path = "interpreter/session.rs"]
mod session;
#[path = "interpreter/support.rs"]
mod support;
#[path = "interpreter/tensor_proto.rs"]
mod tensor_proto;
