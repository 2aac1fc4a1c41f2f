//! The checker: what `onnx.checker.check_model(model, full_check=True)` verifies, without
//! its shape checks. Structural rules (IR version and opset imports, SSA, topological order,
//! defined names across subgraph scopes, graph outputs, declarations, initializers,
//! attributes, model-local functions) and, unless [`CheckOptions::schema_checks`] is off,
//! schema rules per node (operator known at the imported opset, arity, attribute names and
//! types, required attributes, declared types against type constraints, calls of model-local
//! functions against their signature). An input of the main graph's values that the model does
//! not type is checked with the type inference gives it (through calls of model-local
//! functions), as the full check infers types before it checks them; so are the nodes of a
//! called function's body, with the types each call gives them, through nested calls. Every
//! problem is collected; none stops the check.
//!
//! Layout: `graph` walks a graph and its subgraphs, `function` checks model-local functions,
//! `tensor` checks tensors, `schema` checks a node against its operator schema, `error`
//! renders problems.

mod error;
mod function;
mod graph;
mod schema;
mod tensor;

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{FunctionProto, TypeProto};
use onnx_schema::infer::InferOptions;
use onnx_schema::normalize_domain;

pub use error::{CheckError, NodeRef, TensorProblem};
pub use schema::{Port, SchemaProblem};

use crate::model::{Model, OpsetImport};
use graph::{GraphChecker, GraphKind};
use schema::SchemaChecker;

/// The newest IR version the checker accepts: `onnx.IR_VERSION` of onnx 1.23.2.
pub const MAX_IR_VERSION: i64 = 14;

/// Options of [`check_model_with`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CheckOptions {
    /// The newest IR version accepted.
    pub max_ir_version: i64,
    /// Check nodes against the operator schemas of onnx 1.23.2 (on by default). Off, only the
    /// structural rules apply (what `onnx.checker` checks before looking up schemas).
    pub schema_checks: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_ir_version: MAX_IR_VERSION,
            schema_checks: true,
        }
    }
}

impl CheckOptions {
    /// These options with schema checks switched on or off.
    ///
    /// ```
    /// let structural_only = onnx_ir::CheckOptions::default().with_schema_checks(false);
    /// assert!(!structural_only.schema_checks);
    /// ```
    pub fn with_schema_checks(mut self, on: bool) -> Self {
        self.schema_checks = on;
        self
    }
}

/// Checks a model with the default options; `Err` holds every problem found, in model order.
pub fn check_model(model: &Model) -> Result<(), Vec<CheckError>> {
    check_model_with(model, &CheckOptions::default())
}

/// Checks a model; `Err` holds every error found, in model order. Warnings (see
/// [`CheckError::is_warning`]) do not fail the check; [`check_model_report`] gives them.
pub fn check_model_with(model: &Model, options: &CheckOptions) -> Result<(), Vec<CheckError>> {
    let report = check_model_report(model, options);
    if report.errors.is_empty() {
        Ok(())
    } else {
        Err(report.errors)
    }
}

/// What [`check_model_report`] found: errors (the model is invalid) and warnings (it is valid
/// but leans on something non-standard, such as onnxruntime's own LayerNormalization-1 at
/// opset 13), each in model order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckReport {
    /// Problems that make the model invalid.
    pub errors: Vec<CheckError>,
    /// Problems that do not ([`CheckError::is_warning`]).
    pub warnings: Vec<CheckError>,
}

/// Checks a model and returns its errors and warnings apart.
///
/// ```
/// use onnx_ir::onnx_proto::{tensor_proto::DataType, type_proto, TensorShapeProto, TypeProto};
/// use onnx_ir::{check_model_report, CheckOptions, Graph, Model, Node, OpsetImport, Value};
///
/// let float = TypeProto {
///     value: Some(type_proto::Value::TensorType(type_proto::Tensor {
///         elem_type: Some(DataType::Float as i32),
///         shape: Some(TensorShapeProto::default()),
///     })),
///     ..Default::default()
/// };
/// let mut graph = Graph::new("main");
/// let x = graph.add_value(Value::typed("x", float.clone()));
/// let scale = graph.add_value(Value::typed("scale", float.clone()));
/// let y = graph.add_value(Value::typed("y", float));
/// graph.inputs.extend([x, scale]);
/// graph.outputs.push(y);
/// graph.add_node(Node::new("LayerNormalization", vec![Some(x), Some(scale)], vec![Some(y)]));
/// // LayerNormalization is standard from opset 17; at 13 it is onnxruntime's own.
/// let model = Model::new(8, vec![OpsetImport::new("", 13)], graph);
/// let report = check_model_report(&model, &CheckOptions::default());
/// assert_eq!(report.errors, []);
/// assert_eq!(report.warnings.len(), 1);
/// assert!(report.warnings[0].to_string().contains("onnxruntime's registry"));
/// ```
pub fn check_model_report(model: &Model, options: &CheckOptions) -> CheckReport {
    let mut errors = Vec::new();
    let ir_version = match model.ir_version {
        None | Some(0) => {
            errors.push(CheckError::MissingIrVersion);
            None
        }
        Some(v) if v > options.max_ir_version || v < 0 => {
            errors.push(CheckError::UnsupportedIrVersion {
                ir_version: v,
                max: options.max_ir_version,
            });
            Some(v)
        }
        Some(v) => Some(v),
    };
    let mut keys = BTreeSet::new();
    for entry in &model.metadata_props {
        let key = entry.key.clone().unwrap_or_default();
        if !keys.insert(key.clone()) {
            errors.push(CheckError::DuplicateMetadataKey { key });
        }
    }
    check_opset_versions(&model.opset_imports, &mut errors);
    let mut opsets = model.opset_imports.clone();
    match ir_version {
        Some(v) if v >= 3 && opsets.is_empty() => {
            errors.push(CheckError::NoOpsetImport { ir_version: v })
        }
        Some(v) if v < 3 && !opsets.is_empty() => {
            errors.push(CheckError::OpsetImportBeforeIr3 { ir_version: v })
        }
        Some(v) if v < 3 => opsets.push(OpsetImport::new("", 1)),
        _ => {}
    }
    // Without a valid IR version, check the rest as the newest IR.
    let ir = ir_version.unwrap_or(options.max_ir_version);
    let registry = if options.schema_checks {
        match onnx_schema::try_registry() {
            Ok(registry) => Some(registry),
            Err(err) => {
                errors.push(CheckError::SchemaTableUnavailable {
                    reason: err.to_string(),
                });
                None
            }
        }
    } else {
        None
    };
    let function_protos: Vec<_> = match registry {
        Some(_) => model.functions.iter().map(|f| f.to_proto()).collect(),
        None => Vec::new(),
    };
    let schema = registry.map(|registry| SchemaChecker {
        registry,
        functions: &model.functions,
        function_protos: &function_protos,
        ir_version: ir,
    });
    let inferred = schema
        .as_ref()
        .map(|_| inferred_types(model, &opsets, &function_protos));
    let checker = GraphChecker {
        ir_version: ir,
        opsets: &opsets,
        schema: schema.as_ref(),
        inferred: inferred.as_ref(),
    };
    checker.check(
        &model.graph,
        GraphKind::Main,
        &[],
        &mut Vec::new(),
        &mut errors,
    );
    if ir >= 8 {
        function::check_functions(model, ir, schema.as_ref(), &mut errors);
    }
    let (warnings, errors) = errors.into_iter().partition(CheckError::is_warning);
    CheckReport { errors, warnings }
}

/// The types inference gives the main graph's values (through calls of model-local
/// functions, a node it cannot infer left unknown), for the type constraints of values the
/// model does not declare: onnx's full check infers before it checks them.
fn inferred_types(
    model: &Model,
    opsets: &[OpsetImport],
    functions: &[FunctionProto],
) -> BTreeMap<String, TypeProto> {
    let graph = model.graph.to_proto();
    let opsets = opsets
        .iter()
        .map(|o| (normalize_domain(&o.domain).to_string(), o.version))
        .collect();
    let options = InferOptions {
        functions,
        lenient: true,
    };
    onnx_schema::infer::infer_graph_with(&graph, &opsets, options)
        .map(|inferred| inferred.types)
        .unwrap_or_default()
}

fn check_opset_versions(imports: &[OpsetImport], errors: &mut Vec<CheckError>) {
    for import in imports {
        if i32::try_from(import.version).is_err() {
            errors.push(CheckError::OpsetVersionOutOfRange {
                domain: import.domain.clone(),
                version: import.version,
            });
        }
    }
}
