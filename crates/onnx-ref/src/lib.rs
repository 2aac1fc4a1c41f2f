//! onnx-ref: the reference interpreter of onnx-opt, the oracle every optimization is checked
//! against. It runs models directly on the protobuf types (`onnx_proto::ModelProto`) so that it
//! stays independent of the optimizer's IR, with kernels registered by (domain, op, opset
//! version range) and shared with constant folding through [`eval_node`]. Control flow (If,
//! Loop, Scan, SequenceMap) runs subgraphs planned once with their graph; an op without a
//! kernel runs through its function body (model-local functions, or the schema's body).
//!
//! Entry points: [`Session`] (plan a model once, run it many times), [`eval_node`] (one node),
//! [`random_inputs`] (seeded inputs for differential testing), and the value types [`Tensor`]
//! and [`Value`] with their protobuf conversions.

mod control;
mod dtype;
mod error;
mod function;
mod gradient;
pub mod kernels;
pub mod minifloat;
mod numeric;
mod proto;
mod random;
mod registry;
mod session;
mod tensor;
mod value;

pub use dtype::DType;
pub use error::{NodeRef, RefError, Result};
pub use numeric::{AccFloat, Num, Real};
pub use random::{random_inputs, random_tensor};
pub use registry::{
    builtin_registry, eval_node, normalize_domain, KernelCtx, KernelFn, KernelRegistry, LATEST,
};
pub use session::{
    declared_type, model_opsets, opaque_nodes, DeclaredType, Opsets, Profile, Scope, Session,
};
pub use tensor::{
    array_from_vec, check_size, element_limit, set_element_limit, Array, Elem, ElementLimit,
    Tensor, MAX_ELEMENTS,
};
pub use value::{MapValue, Sequence, Value};
