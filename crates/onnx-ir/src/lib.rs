//! onnx-ir: the in-memory ONNX model of onnx-opt.
//!
//! - [`Model`], [`Graph`], [`Node`], [`Value`], [`Function`]: arenas with typed handles
//!   ([`ValueId`], [`NodeId`]) and interned [`Name`]s; subgraphs of If/Loop/Scan are IR graphs
//!   inside [`AttributeValue`], with outer-scope reads as values marked `is_outer`.
//! - Lossless conversion: `Model::from_proto(p)?.to_proto() == p` for every well-formed
//!   message, valid or not (duplicates, cycles, undefined names are kept for the checker).
//! - [`Graph::topological_order`] / [`Graph::sort_topologically`]: a stable Kahn order.
//! - [`check_model`]: the checker, as `onnx.checker.check_model(m, full_check=True)` without
//!   shape inference: structural rules, then each node against its operator schema of onnx
//!   1.23.2 (op known at the imported opset, arity, attributes, type constraints on declared
//!   types; calls of model-local functions against their signature). Problems come back as
//!   [`CheckError`]s, schema ones as [`CheckError::Schema`] with a [`SchemaProblem`];
//!   [`CheckOptions::with_schema_checks`] turns the schema rules off.
//!
//! # Example
//!
//! ```
//! use onnx_ir::onnx_proto::{tensor_proto::DataType, tensor_shape_proto, type_proto, TensorShapeProto, TypeProto};
//! use onnx_ir::{check_model, Graph, Model, Node, OpsetImport, Value};
//!
//! let float2 = TypeProto {
//!     value: Some(type_proto::Value::TensorType(type_proto::Tensor {
//!         elem_type: Some(DataType::Float as i32),
//!         shape: Some(TensorShapeProto {
//!             dim: vec![tensor_shape_proto::Dimension {
//!                 value: Some(tensor_shape_proto::dimension::Value::DimValue(2)),
//!                 ..Default::default()
//!             }],
//!         }),
//!     })),
//!     ..Default::default()
//! };
//! let mut graph = Graph::new("main");
//! let x = graph.add_value(Value::typed("x", float2.clone()));
//! let y = graph.add_value(Value::typed("y", float2));
//! graph.inputs.push(x);
//! graph.outputs.push(y);
//! graph.add_node(Node::new("Relu", vec![Some(x)], vec![Some(y)]));
//! let model = Model::new(8, vec![OpsetImport::new("", 17)], graph);
//! assert_eq!(check_model(&model), Ok(()));
//!
//! // Lossless: back to protobuf and into IR again.
//! let proto = model.to_proto();
//! let again = Model::from_proto(proto.clone()).unwrap();
//! assert_eq!(again.to_proto(), proto);
//! assert_eq!(again.graph.find_value("y"), Some(y));
//! ```

mod attribute;
mod check;
mod error;
mod export;
mod graph;
mod import;
mod model;
mod name;
mod topo;

pub use check::MAX_IR_VERSION;
pub use check::{
    check_model, check_model_report, check_model_with, CheckError, CheckOptions, CheckReport,
    NodeRef, Port, SchemaProblem, TensorProblem,
};
pub use error::IrError;
pub use graph::{Attribute, AttributeValue};
pub use graph::{Graph, InfoList, InfoOverride, Node, NodeFieldPresence, NodeId, Value, ValueId};
pub use import::MAX_SUBGRAPH_DEPTH;
pub use model::{opset_version_in, same_domain, Function, Model, OpsetFieldPresence, OpsetImport};
pub use name::{Interner, Name};
pub use onnx_proto;
