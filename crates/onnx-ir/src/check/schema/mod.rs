//! Schema-driven checks of one node, as `onnx.checker`'s `check_node` -> `OpSchema::Verify`,
//! plus the type-constraint checks of its full check (`CheckInputOutputType`):
//!
//! - a node that calls a model-local function is checked against the function's signature
//!   (input and output counts, attribute names), never against a schema; in the main graph's
//!   walk, the function's body nodes are then checked against their type constraints with the
//!   types the call gives them (inferred through the body, attribute references resolved from
//!   the call), and calls in the body are followed the same way (`SchemaProblem::InCall`);
//! - a node of a domain onnx defines ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview",
//!   "ai.onnx.preview.training", "ai.onnx.training") must bind to a schema at the imported
//!   opset that is not deprecated; its input and output counts, empty required inputs and
//!   outputs, attribute names, types and required attributes are checked (`types` checks the
//!   declared types, or an undeclared input's inferred type, against the type constraints, `body`
//!   the function bodies onnx expands);
//! - a node of `com.microsoft` is checked the same way against onnxruntime's own schemas (see
//!   `onnx_schema::SchemaOrigin`); an op onnxruntime 1.31.1 does not register there passes
//!   unchecked, as before its schemas were known (newer or training-only contrib ops);
//! - a node of an onnx domain that binds to a schema only onnxruntime registers
//!   (LayerNormalization-1 and SimplifiedLayerNormalization-1 below opset 17, ...) is checked
//!   against it and gets a warning ([`SchemaProblem::OnnxRuntimeOnly`]), not an error;
//! - a node of any other domain passes: no schema, nothing to check beyond structure.
//!
//! onnx.checker's exceptions are kept: its experimental ops (`ATen`, `Scale`, ...) in the ONNX
//! domain are not checked, attributes whose names start with `__` are implementation details,
//! LayerNormalization-17 accepts unknown attributes, and BatchNormalization takes 1 or 5
//! outputs (versions 1 to 9) or 1 or 3 (versions 14 and 15).

mod body;
mod problem;
mod types;

use std::collections::BTreeMap;

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, FunctionProto, TypeProto};
use onnx_schema::infer::{infer_function_call, InferOptions};
use onnx_schema::{normalize_domain, OpSchema, ParamOption, SchemaRegistry};

pub use problem::{Port, SchemaProblem};
pub(crate) use types::TypeScope;

use crate::graph::{AttributeValue, Graph, Node};
use crate::model::{opset_version_in, Function, OpsetImport};

/// Ops `onnx.checker` calls experimental: it skips their schema check (checker.cc).
const EXPERIMENTAL_OPS: [&str; 11] = [
    "ATen",
    "Affine",
    "ConstantFill",
    "Crop",
    "DynamicSlice",
    "GRUUnit",
    "GivenTensorFill",
    "ImageScaler",
    "ParametricSoftplus",
    "Scale",
    "ScaledTanh",
];

/// onnxruntime's contrib domain: its schemas are at home there, so no warning; an op its
/// registry lacks passes unchecked, like a custom domain's.
const ONNXRUNTIME_DOMAIN: &str = "com.microsoft";

/// Model-wide facts the schema checks need.
pub(crate) struct SchemaChecker<'a> {
    /// The operator schemas.
    pub(crate) registry: &'a SchemaRegistry,
    /// The model's local functions (the first of a repeated id is the one nodes call).
    pub(crate) functions: &'a [Function],
    /// The same functions as protos (for inference), in the same order.
    pub(crate) function_protos: &'a [FunctionProto],
    /// The model's IR version.
    pub(crate) ir_version: i64,
}

/// How many calls of model-local functions the checker follows into their bodies, one inside
/// another (functions that call each other in a cycle are an error of their own).
const MAX_CALL_DEPTH: usize = 16;

/// A function body checked for one call: its opset imports and the types the call gives its
/// values.
struct BodyWalk<'a> {
    opsets: &'a [OpsetImport],
    inferred: &'a BTreeMap<String, TypeProto>,
    /// The call's attributes (references in them resolved).
    attributes: &'a [AttributeProto],
    /// The function's attribute defaults.
    defaults: &'a [AttributeProto],
    /// Calls followed to get here.
    depth: usize,
}

/// How messages name a schema: `Mul-14`, `ai.onnx.ml:Normalizer-1`.
pub(crate) fn schema_label(schema: &OpSchema) -> String {
    if schema.domain.is_empty() {
        format!("{}-{}", schema.name, schema.since_version)
    } else {
        format!("{}:{}-{}", schema.domain, schema.name, schema.since_version)
    }
}

/// How messages name a model-local function: `function 'custom:F'`.
fn function_label(function: &Function) -> String {
    let (domain, name, overload) = function.id();
    if overload.is_empty() {
        format!("function '{domain}:{name}'")
    } else {
        format!("function '{domain}:{name}:{overload}'")
    }
}

/// The node-output counts a schema allows beyond its min/max range, as onnx's
/// `NumOutputs(std::unordered_set<int>)` (only BatchNormalization uses it).
fn allowed_output_counts(schema: &OpSchema) -> Option<&'static [usize]> {
    if !schema.domain.is_empty() || schema.name != "BatchNormalization" {
        return None;
    }
    match schema.since_version {
        1 | 6 | 7 | 9 => Some(&[1, 5]),
        14 | 15 => Some(&[1, 3]),
        _ => None,
    }
}

/// Whether a schema accepts attributes it does not declare (onnx's
/// `AllowUncheckedAttributes`, set only by LayerNormalization-17).
fn allows_unchecked_attributes(schema: &OpSchema) -> bool {
    schema.domain.is_empty() && schema.name == "LayerNormalization" && schema.since_version == 17
}

impl<'a> SchemaChecker<'a> {
    /// onnx's schema of `node` at `opset`, else onnxruntime's own in onnx's domain.
    fn lookup(&self, node: &Node, opset: i64) -> Option<&'a OpSchema> {
        self.registry
            .lookup(&node.domain, &node.op_type, opset)
            .or_else(|| {
                onnx_schema::onnxruntime_extensions().lookup(&node.domain, &node.op_type, opset)
            })
    }

    /// Checks one node whose domain is imported at `opset`; problems go to `out`.
    pub(crate) fn check_node(
        &self,
        scope: &TypeScope<'_>,
        node: &Node,
        opset: i64,
        out: &mut Vec<SchemaProblem>,
    ) {
        if node.op_type.is_empty() {
            return;
        }
        if let Some(index) = self.local_function(node) {
            if let Some(function) = self.functions.get(index) {
                check_function_call(function, node, out);
                // In the main graph's walk, where types are inferred: check the body with the
                // types this call gives it.
                if scope.inferred.is_some() {
                    let attributes: Vec<AttributeProto> = (node.attributes.iter())
                        .filter_map(|a| a.fields().cloned())
                        .collect();
                    self.check_call_body(index, scope, node, &attributes, 0, out);
                }
            }
            return;
        }
        // A domain onnx does not define: no schema, nothing to check beyond structure.
        if self.registry.opset_range(&node.domain).is_none() {
            return;
        }
        if node.is_onnx_domain() && EXPERIMENTAL_OPS.contains(&&*node.op_type) {
            return;
        }
        // onnx's schema, else onnxruntime's own in onnx's domain (warned about below).
        let schema = self.lookup(node, opset);
        let Some(schema) = schema else {
            if &*node.domain == ONNXRUNTIME_DOMAIN {
                // onnxruntime's domain, an op its registry does not have: unchecked.
                return;
            }
            let versions = self.registry.versions(&node.domain, &node.op_type);
            out.push(match versions.first() {
                Some(first) => SchemaProblem::NotAvailableAtOpset {
                    op_type: node.op_type.clone(),
                    domain: normalize_domain(&node.domain).into(),
                    opset,
                    introduced: first.since_version,
                },
                None => SchemaProblem::UnknownOperator {
                    op_type: node.op_type.clone(),
                    domain: normalize_domain(&node.domain).into(),
                    opset,
                },
            });
            return;
        };
        let callee = schema_label(schema);
        if schema.deprecated {
            out.push(SchemaProblem::Deprecated { callee, opset });
            return;
        }
        if schema.is_onnxruntime() && &*node.domain != ONNXRUNTIME_DOMAIN {
            out.push(SchemaProblem::OnnxRuntimeOnly {
                callee: callee.clone(),
                opset,
            });
        }
        check_arity(schema, &callee, node, out);
        self.check_attributes(schema, &callee, node, out);
        types::check_types(schema, &callee, scope, node, out);
        body::check_body_expansion(self.registry, schema, &callee, node, out);
    }

    /// The index of the model-local function `node` calls, if it calls one.
    fn local_function(&self, node: &Node) -> Option<usize> {
        let overload = node.overload.as_deref().unwrap_or("");
        let id = (&*node.domain, &*node.op_type, overload);
        self.functions.iter().position(|f| f.id() == id)
    }

    /// Checks the body of the function (index `function` of the model's) that `call` calls,
    /// with the types the call gives it: its formal inputs typed as the call's inputs are
    /// (declared, else inferred), inferred through the body with its attribute references
    /// resolved from the call. Each body node is checked against its type constraints (what
    /// the body's own check, on declared types only, reports is not repeated) and each call in
    /// it is followed the same way, `depth` counting the calls followed so far.
    fn check_call_body(
        &self,
        function: usize,
        scope: &TypeScope<'_>,
        call: &Node,
        attributes: &[AttributeProto],
        depth: usize,
        out: &mut Vec<SchemaProblem>,
    ) {
        let (Some(f), Some(proto)) = (
            self.functions.get(function),
            self.function_protos.get(function),
        ) else {
            return;
        };
        if depth >= MAX_CALL_DEPTH {
            return;
        }
        let input_types: Vec<Option<TypeProto>> = (call.inputs.iter())
            .map(|v| v.and_then(|id| scope.value_type(id)))
            .collect();
        let options = InferOptions {
            functions: self.function_protos,
            lenient: true,
        };
        let Ok(inferred) = infer_function_call(proto, attributes, &input_types, options) else {
            return;
        };
        let (domain, name, overload) = f.id();
        let label = if overload.is_empty() {
            format!("{domain}:{name}")
        } else {
            format!("{domain}:{name}:{overload}")
        };
        let mut found = Vec::new();
        let body = BodyWalk {
            opsets: &f.opset_imports,
            inferred: &inferred.types,
            attributes,
            defaults: &f.attribute_protos,
            depth,
        };
        self.check_body_types(&body, &f.body, &[], "", &mut found);
        out.extend(
            found
                .into_iter()
                .map(|(at, problem)| SchemaProblem::InCall {
                    function: label.clone(),
                    at,
                    problem: Box::new(problem),
                }),
        );
    }

    /// Checks the type constraints of the nodes of `graph` (a function body for one call, or a
    /// subgraph in it, `enclosing` holding the graphs around it), each problem with the body
    /// node's place (`path` leads to `graph`).
    fn check_body_types<'g>(
        &self,
        body: &BodyWalk<'_>,
        graph: &'g Graph,
        enclosing: &[&'g Graph],
        path: &str,
        out: &mut Vec<(String, SchemaProblem)>,
    ) {
        for (index, &id) in graph.order.iter().enumerate() {
            let Some(node) = graph.get_node(id) else {
                continue;
            };
            let at = match &node.name {
                Some(name) => format!("{path}node {index} '{name}' ({})", node.op_type),
                None => format!("{path}node {index} ({})", node.op_type),
            };
            if let Some(opset) = opset_version_in(body.opsets, &node.domain) {
                let scope = TypeScope {
                    graph,
                    outer: enclosing,
                    inferred: Some(body.inferred),
                };
                let mut problems = Vec::new();
                self.check_node_types(&scope, node, opset, body, &mut problems);
                out.extend(problems.into_iter().map(|p| (at.clone(), p)));
            }
            let mut inner: Vec<&'g Graph> = enclosing.to_vec();
            inner.push(graph);
            for attribute in &node.attributes {
                let many = matches!(attribute.value, AttributeValue::Graphs(_));
                for (i, sub) in attribute.value.subgraphs().enumerate() {
                    let sub_path = if many {
                        format!("{at}, {} {i}, ", attribute.name)
                    } else {
                        format!("{at}, {}, ", attribute.name)
                    };
                    self.check_body_types(body, sub, &inner, &sub_path, out);
                }
            }
        }
    }

    /// The type-constraint check of one node of a function body for one call: a call of a
    /// model-local function is followed into its body, a node with a schema is checked against
    /// its type constraints (only problems the declared types alone do not show).
    fn check_node_types(
        &self,
        scope: &TypeScope<'_>,
        node: &Node,
        opset: i64,
        body: &BodyWalk<'_>,
        out: &mut Vec<SchemaProblem>,
    ) {
        if node.op_type.is_empty() {
            return;
        }
        if let Some(index) = self.local_function(node) {
            // The call's attribute references resolved from the enclosing call, else the
            // enclosing function's defaults, else dropped.
            let attributes: Vec<AttributeProto> = (node.attributes.iter())
                .filter_map(|a| {
                    let a = a.fields()?;
                    let Some(r) = a.ref_attr_name.as_deref().filter(|r| !r.is_empty()) else {
                        return Some(a.clone());
                    };
                    let by_name = |x: &&AttributeProto| x.name.as_deref() == Some(r);
                    let value = (body.attributes.iter().find(by_name))
                        .or_else(|| body.defaults.iter().find(by_name))?;
                    Some(AttributeProto {
                        name: a.name.clone(),
                        ..value.clone()
                    })
                })
                .collect();
            self.check_call_body(index, scope, node, &attributes, body.depth + 1, out);
            return;
        }
        if self.registry.opset_range(&node.domain).is_none()
            || (node.is_onnx_domain() && EXPERIMENTAL_OPS.contains(&&*node.op_type))
        {
            return;
        }
        let schema = self.lookup(node, opset);
        let Some(schema) = schema.filter(|s| !s.deprecated) else {
            return;
        };
        let callee = schema_label(schema);
        let mut found = Vec::new();
        types::check_types(schema, &callee, scope, node, &mut found);
        let declared_only = TypeScope {
            graph: scope.graph,
            outer: scope.outer,
            inferred: None,
        };
        let mut declared = Vec::new();
        types::check_types(schema, &callee, &declared_only, node, &mut declared);
        out.extend(found.into_iter().filter(|p| !declared.contains(p)));
    }

    fn check_attributes(
        &self,
        schema: &OpSchema,
        callee: &str,
        node: &Node,
        out: &mut Vec<SchemaProblem>,
    ) {
        for attribute in &node.attributes {
            let Some(expected) = schema.attribute(&attribute.name) else {
                if !attribute.name.starts_with("__") && !allows_unchecked_attributes(schema) {
                    out.push(SchemaProblem::UnknownAttribute {
                        attribute: attribute.name.clone(),
                        callee: callee.to_string(),
                    });
                }
                continue;
            };
            let declared = attribute.fields().and_then(|p| p.r#type);
            if declared != Some(expected.ty as i32) {
                // A missing type field is already reported by the structural check from IR 2 on.
                if declared.is_some() || self.ir_version < 2 {
                    out.push(SchemaProblem::AttributeTypeMismatch {
                        attribute: attribute.name.clone(),
                        callee: callee.to_string(),
                        expected: expected.ty.as_str_name().to_string(),
                        actual: declared.map_or_else(
                            || "UNDEFINED".to_string(),
                            |t| {
                                AttributeType::try_from(t)
                                    .map(|t| t.as_str_name().to_string())
                                    .unwrap_or_else(|_| t.to_string())
                            },
                        ),
                    });
                }
                continue;
            }
            if attribute.ref_attr_name().is_some_and(|r| !r.is_empty()) {
                continue;
            }
            let proto = attribute.fields();
            let missing_field = match expected.ty {
                AttributeType::Tensor => proto.is_none_or(|p| p.t.is_none()).then_some("t"),
                AttributeType::SparseTensor => proto
                    .is_none_or(|p| p.sparse_tensor.is_none())
                    .then_some("sparse_tensor"),
                AttributeType::TypeProto => proto.is_none_or(|p| p.tp.is_none()).then_some("tp"),
                AttributeType::Graph => {
                    (!matches!(attribute.value, AttributeValue::Graph(_))).then_some("g")
                }
                _ => None,
            };
            if let Some(field) = missing_field {
                out.push(SchemaProblem::AttributeValueMissing {
                    attribute: attribute.name.clone(),
                    ty: expected.ty.as_str_name().to_string(),
                    field,
                });
            }
        }
        for expected in schema.attributes.iter().filter(|a| a.required) {
            if node.attribute(&expected.name).is_none() {
                out.push(SchemaProblem::MissingRequiredAttribute {
                    attribute: expected.name.clone(),
                    callee: callee.to_string(),
                });
            }
        }
    }
}

/// Input and output counts, and required inputs and outputs given as "".
fn check_arity(schema: &OpSchema, callee: &str, node: &Node, out: &mut Vec<SchemaProblem>) {
    let sides = [
        (
            Port::Input,
            node.inputs.as_slice(),
            &schema.inputs,
            schema.min_input,
            schema.max_input,
            None,
        ),
        (
            Port::Output,
            node.outputs.as_slice(),
            &schema.outputs,
            schema.min_output,
            schema.max_output,
            allowed_output_counts(schema),
        ),
    ];
    for (port, given, formals, min, max, allowed) in sides {
        let count = given.len();
        let mut count_ok = true;
        if count < min {
            out.push(SchemaProblem::TooFew {
                port,
                callee: callee.to_string(),
                min,
                given: count,
            });
            count_ok = false;
        } else if count > max {
            out.push(SchemaProblem::TooMany {
                port,
                callee: callee.to_string(),
                max,
                given: count,
            });
            count_ok = false;
        } else if let Some(allowed) = allowed.filter(|a| !a.contains(&count)) {
            out.push(SchemaProblem::CountNotAllowed {
                port,
                callee: callee.to_string(),
                allowed: allowed.to_vec(),
                given: count,
            });
            count_ok = false;
        }
        let last_is_variadic = formals
            .last()
            .is_some_and(|p| p.option == ParamOption::Variadic);
        if count_ok && count > formals.len() && !last_is_variadic {
            out.push(SchemaProblem::TooMany {
                port,
                callee: callee.to_string(),
                max: formals.len(),
                given: count,
            });
        }
        for (index, (value, formal)) in given.iter().zip(formals).enumerate() {
            if value.is_none() && formal.option == ParamOption::Single {
                out.push(SchemaProblem::RequiredIsEmpty {
                    port,
                    index,
                    param: formal.name.clone(),
                    callee: callee.to_string(),
                });
            }
        }
    }
}

/// A call of a model-local function: no more inputs and outputs than its formal parameters,
/// only attributes it declares (with or without a default).
fn check_function_call(function: &Function, node: &Node, out: &mut Vec<SchemaProblem>) {
    let callee = function_label(function);
    for (port, given, max) in [
        (Port::Input, node.inputs.len(), function.body.inputs.len()),
        (
            Port::Output,
            node.outputs.len(),
            function.body.outputs.len(),
        ),
    ] {
        if given > max {
            out.push(SchemaProblem::TooMany {
                port,
                callee: callee.clone(),
                max,
                given,
            });
        }
    }
    for attribute in &node.attributes {
        let declared = function.attributes.contains(&attribute.name)
            || function
                .attribute_protos
                .iter()
                .any(|a| a.name.as_deref() == Some(&*attribute.name));
        if !declared {
            out.push(SchemaProblem::UnknownAttribute {
                attribute: attribute.name.clone(),
                callee: callee.clone(),
            });
        }
    }
}
