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
//!
//! The modules are layers, each importing only those below it: tensors, values and numerics;
//! the kernel interface (`kernel`: [`KernelFn`], [`KernelCtx`], [`KernelRegistry`]); the
//! kernels ([`kernels`]); the built-in registry ([`builtin_registry`]); the executor of planned
//! graphs (`plan`); the node plans that run subgraphs (`control`, `function`, `gradient`,
//! `flex_attention`); the planner and [`Session`] (`session`); and [`eval_node`] (`eval`).

mod control;
mod dtype;
mod error;
mod eval;
mod flex_attention;
mod function;
mod gradient;
mod kernel;
pub mod kernels;
pub mod minifloat;
mod numeric;
mod plan;
mod proto;
mod random;
mod registry;
mod session;
mod tensor;
mod value;

pub use dtype::DType;
pub use error::{NodeRef, RefError, Result};
pub use eval::eval_node;
pub use kernel::{normalize_domain, KernelCtx, KernelFn, KernelRegistry, LATEST};
pub use numeric::{AccFloat, Num, Real};
pub use plan::{declared_type, DeclaredType, Opsets, Profile};
pub use random::{random_inputs, random_tensor};
pub use registry::builtin_registry;
pub use session::{model_opsets, opaque_nodes, opaque_subgraph_nodes, Scope, Session};
pub use tensor::{
    array_from_vec, check_size, element_limit, set_element_limit, Array, Elem, ElementLimit,
    Tensor, MAX_ELEMENTS,
};
pub use value::{MapValue, Sequence, Value};
