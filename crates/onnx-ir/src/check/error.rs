//! [`CheckError`]: one structured variant per rule, rendered as a sentence that names the
//! node (position in the graph's node order, name, operator) and the value concerned.
//! Problems inside a subgraph or function body are wrapped in [`CheckError::InSubgraph`] or
//! [`CheckError::InFunction`], so the message reads as a path from the model down.

use std::fmt;

use crate::check::schema::SchemaProblem;
use crate::graph::{InfoList, NodeId};
use crate::name::Name;

/// A node as named in messages: `node 3 'conv1' (Conv)`, or `node 3 (Conv)` without a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    /// The node's handle.
    pub id: NodeId,
    /// Its position in the graph's node order.
    pub index: usize,
    /// Its name.
    pub name: Option<Name>,
    /// Its operator.
    pub op_type: Name,
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "node {} '{}' ({})", self.index, name, self.op_type),
            None => write!(f, "node {} ({})", self.index, self.op_type),
        }
    }
}

/// The label of a declaration list in messages.
pub(crate) fn list_label(list: InfoList) -> &'static str {
    match list {
        InfoList::Input => "graph input",
        InfoList::Output => "graph output",
        InfoList::ValueInfo => "value_info entry",
    }
}

/// What is wrong with a tensor (an initializer or a tensor attribute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorProblem {
    /// `data_type` is missing or UNDEFINED.
    NoDataType,
    /// A dimension is negative.
    NegativeDimension {
        /// The dimension's position.
        index: usize,
        /// Its value.
        dim: i64,
    },
    /// The element count (or byte size) does not fit in 64 bits.
    SizeOverflow,
    /// Stored externally but also holds data in the message.
    ExternalWithData,
    /// Stored externally without a `location` entry.
    ExternalWithoutLocation,
    /// Zero elements but a data field is set.
    EmptyWithData,
    /// Not exactly one data field set for a non-empty tensor.
    DataFieldCount(usize),
    /// A STRING tensor stored in `raw_data`.
    StringInRawData,
    /// A data type onnx does not define, with its data in a typed field.
    UnknownDataType(i32),
    /// The data is in a typed field the data type does not use.
    WrongDataField {
        /// The field the data type uses, e.g. "int64_data".
        expected: &'static str,
        /// The field that is set.
        actual: &'static str,
    },
    /// A typed data field with fewer entries than the shape requires.
    TypedDataTooSmall {
        /// The field.
        field: &'static str,
        /// Entries present.
        actual: usize,
        /// Entries required.
        expected: u64,
    },
    /// `raw_data` is shorter than the shape and type require.
    RawDataTooSmall {
        /// Bytes present.
        actual: usize,
        /// Bytes required.
        expected: u64,
    },
}

impl fmt::Display for TensorProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TensorProblem::NoDataType => f.write_str("has no data type"),
            TensorProblem::NegativeDimension { index, dim } => {
                write!(f, "has a negative dimension ({dim} at position {index})")
            }
            TensorProblem::SizeOverflow => f.write_str("has more elements than 64 bits can count"),
            TensorProblem::ExternalWithData => {
                f.write_str("is stored externally but also holds data")
            }
            TensorProblem::ExternalWithoutLocation => {
                f.write_str("is stored externally without a location")
            }
            TensorProblem::EmptyWithData => f.write_str("has 0 elements but holds data"),
            TensorProblem::DataFieldCount(n) => {
                write!(f, "must hold its data in exactly one field, not {n}")
            }
            TensorProblem::StringInRawData => f.write_str("stores strings in raw_data"),
            TensorProblem::UnknownDataType(data_type) => {
                write!(f, "has data type {data_type}, which ONNX does not define")
            }
            TensorProblem::WrongDataField { expected, actual } => write!(
                f,
                "stores its values in '{actual}', but its data type uses '{expected}'"
            ),
            TensorProblem::TypedDataTooSmall {
                field,
                actual,
                expected,
            } => write!(
                f,
                "has {actual} entries in {field}, fewer than the {expected} its shape needs"
            ),
            TensorProblem::RawDataTooSmall { actual, expected } => write!(
                f,
                "has {actual} bytes of raw_data, fewer than the {expected} its shape and type need"
            ),
        }
    }
}

/// One problem found by [`check_model`](crate::check_model).
#[derive(Debug, Clone, PartialEq)]
pub enum CheckError {
    /// The model has no IR version (or 0).
    MissingIrVersion,
    /// The IR version is newer than this checker knows.
    UnsupportedIrVersion {
        /// The model's IR version.
        ir_version: i64,
        /// The newest supported.
        max: i64,
    },
    /// IR >= 3 without any opset import.
    NoOpsetImport {
        /// The model's IR version.
        ir_version: i64,
    },
    /// IR < 3 with opset imports (they did not exist then).
    OpsetImportBeforeIr3 {
        /// The model's IR version.
        ir_version: i64,
    },
    /// An opset version outside the 32-bit range ONNX tools accept.
    OpsetVersionOutOfRange {
        /// The domain.
        domain: Name,
        /// The version.
        version: i64,
    },
    /// A metadata key appears twice in the model's metadata_props.
    DuplicateMetadataKey {
        /// The key.
        key: String,
    },
    /// A handle does not point into its graph's arenas.
    InvalidHandle {
        /// "value" or "node".
        what: &'static str,
        /// The handle's index.
        index: u32,
        /// Where it was found.
        place: String,
    },
    /// The graph has no name.
    EmptyGraphName,
    /// A declaration with an empty name.
    EmptyDeclarationName {
        /// The list.
        list: InfoList,
        /// Position in the list.
        index: usize,
    },
    /// A main-graph input or output without a type.
    MissingType {
        /// The list.
        list: InfoList,
        /// The value.
        value: Name,
    },
    /// A main-graph input or output whose type lacks a required field.
    IncompleteType {
        /// The list.
        list: InfoList,
        /// The value.
        value: Name,
        /// The missing field, e.g. "shape".
        field: &'static str,
    },
    /// Two graph inputs with one name.
    DuplicateInput {
        /// The name.
        value: Name,
    },
    /// An initializer with an empty name.
    EmptyInitializerName {
        /// Position in the initializer list (sparse initializers follow dense ones).
        index: usize,
    },
    /// Two initializers (dense or sparse) with one name.
    DuplicateInitializer {
        /// The name.
        value: Name,
    },
    /// IR < 4: an initializer that is not also a graph input.
    InitializerNotInput {
        /// The name.
        value: Name,
        /// The model's IR version.
        ir_version: i64,
    },
    /// An initializer or tensor attribute that is not a valid tensor.
    InvalidTensor {
        /// The tensor's name (or the attribute's, for a tensor attribute).
        tensor: Name,
        /// What is wrong.
        problem: TensorProblem,
    },
    /// A node reads a name that nothing visible defines.
    UndefinedInput {
        /// The node.
        node: NodeRef,
        /// The name read.
        value: Name,
    },
    /// A node reads a value that a later node defines.
    UseBeforeDefinition {
        /// The node.
        node: NodeRef,
        /// The name read.
        value: Name,
        /// The node that defines it.
        producer: NodeRef,
    },
    /// The nodes depend on each other in a cycle.
    Cycle {
        /// A node on the cycle.
        node: NodeRef,
    },
    /// A node output whose name is already defined in the same graph (not SSA).
    DuplicateDefinition {
        /// The node.
        node: NodeRef,
        /// The output name.
        value: Name,
    },
    /// A subgraph node output that reuses a name of an enclosing graph.
    ShadowsOuterName {
        /// The node.
        node: NodeRef,
        /// The output name.
        value: Name,
    },
    /// A graph output that this graph does not define.
    UndefinedOutput {
        /// The name.
        value: Name,
        /// True when the name is read from an enclosing graph.
        from_outer_scope: bool,
    },
    /// A node without an operator.
    EmptyOpType {
        /// The node.
        node: NodeRef,
    },
    /// A node with neither inputs nor outputs.
    NoInputsOrOutputs {
        /// The node.
        node: NodeRef,
    },
    /// A node whose domain has no opset import.
    MissingOpsetImport {
        /// The node.
        node: NodeRef,
        /// The domain.
        domain: Name,
    },
    /// Two attributes of a node with one name.
    DuplicateAttribute {
        /// The node.
        node: NodeRef,
        /// The attribute.
        attribute: Name,
    },
    /// An attribute with an empty name.
    EmptyAttributeName {
        /// The node.
        node: NodeRef,
    },
    /// IR >= 2: an attribute without its `type` field.
    AttributeWithoutType {
        /// The node.
        node: NodeRef,
        /// The attribute.
        attribute: Name,
    },
    /// An attribute whose `type` field disagrees with the value field that is set.
    AttributeTypeMismatch {
        /// The node.
        node: NodeRef,
        /// The attribute.
        attribute: Name,
        /// The declared type, e.g. "INT".
        declared: String,
        /// The value field that is set, e.g. "floats".
        field: &'static str,
    },
    /// An attribute with more than one value field set.
    AttributeMultipleValues {
        /// The node.
        node: NodeRef,
        /// The attribute.
        attribute: Name,
        /// The value fields that are set.
        fields: Vec<&'static str>,
    },
    /// A subgraph or function-body attribute that refers to a caller attribute and also
    /// carries a value.
    RefAttributeWithValue {
        /// The node.
        node: NodeRef,
        /// The attribute.
        attribute: Name,
    },
    /// A function without a name.
    EmptyFunctionName {
        /// Position in the model's function list.
        index: usize,
    },
    /// IR >= 8: a function without a domain field.
    FunctionWithoutDomain {
        /// The function's name.
        function: Name,
    },
    /// Two functions with one (domain, name, overload).
    DuplicateFunction {
        /// "domain:name" or "domain:name:overload".
        function: String,
    },
    /// A function lists a formal input, output or attribute name twice.
    DuplicateFunctionName {
        /// The function.
        function: String,
        /// "input", "output" or "attribute".
        what: &'static str,
        /// The repeated name.
        name: Name,
    },
    /// Model-local functions that call each other in a cycle.
    FunctionCallCycle {
        /// The functions on the cycle, first repeated at the end.
        cycle: Vec<String>,
    },
    /// A node its operator schema, or the model-local function it calls, rejects.
    Schema {
        /// The node.
        node: NodeRef,
        /// What is wrong.
        problem: SchemaProblem,
    },
    /// The embedded operator schema table could not be read, so no node was checked against
    /// a schema.
    SchemaTableUnavailable {
        /// Why.
        reason: String,
    },
    /// A problem inside a subgraph held by a node's attribute.
    InSubgraph {
        /// The node holding the subgraph.
        node: NodeRef,
        /// The attribute.
        attribute: Name,
        /// Position in a GRAPHS attribute.
        graph_index: Option<usize>,
        /// The problem.
        error: Box<CheckError>,
    },
    /// A problem inside a model-local function.
    InFunction {
        /// "domain:name" (":overload" when present).
        function: String,
        /// The problem.
        error: Box<CheckError>,
    },
}

impl CheckError {
    /// Whether this is a warning, which does not fail the check (see [`check_model_report`]):
    /// today only [`SchemaProblem::OnnxRuntimeOnly`], in any subgraph or function.
    ///
    /// [`check_model_report`]: crate::check_model_report
    pub fn is_warning(&self) -> bool {
        match self.innermost() {
            CheckError::Schema { problem, .. } => problem.is_warning(),
            _ => false,
        }
    }

    /// The node the problem is in: the innermost one that has a node, else the node owning
    /// the subgraph it is in; `None` for a problem of the model, a graph or a function.
    pub fn node(&self) -> Option<&NodeRef> {
        use CheckError as E;
        match self {
            E::InSubgraph { node, error, .. } => error.node().or(Some(node)),
            E::InFunction { error, .. } => error.node(),
            E::UndefinedInput { node, .. }
            | E::UseBeforeDefinition { node, .. }
            | E::Cycle { node, .. }
            | E::DuplicateDefinition { node, .. }
            | E::ShadowsOuterName { node, .. }
            | E::EmptyOpType { node, .. }
            | E::NoInputsOrOutputs { node, .. }
            | E::MissingOpsetImport { node, .. }
            | E::DuplicateAttribute { node, .. }
            | E::EmptyAttributeName { node, .. }
            | E::AttributeWithoutType { node, .. }
            | E::AttributeTypeMismatch { node, .. }
            | E::AttributeMultipleValues { node, .. }
            | E::RefAttributeWithValue { node, .. }
            | E::Schema { node, .. } => Some(node),
            _ => None,
        }
    }

    /// The innermost problem, without subgraph or function context.
    pub fn innermost(&self) -> &CheckError {
        match self {
            CheckError::InSubgraph { error, .. } | CheckError::InFunction { error, .. } => {
                error.innermost()
            }
            other => other,
        }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CheckError as E;
        match self {
            E::MissingIrVersion => f.write_str("the model has no IR version"),
            E::UnsupportedIrVersion { ir_version, max } => write!(
                f,
                "IR version {ir_version} is not supported (this checker knows 1 to {max})"
            ),
            E::NoOpsetImport { ir_version } => write!(
                f,
                "a model with IR version {ir_version} must import at least one opset"
            ),
            E::OpsetImportBeforeIr3 { ir_version } => write!(
                f,
                "a model with IR version {ir_version} cannot import opsets (IR 3 introduced them)"
            ),
            E::OpsetVersionOutOfRange { domain, version } => {
                write!(f, "opset import of domain '{domain}' has version {version}, out of range")
            }
            E::DuplicateMetadataKey { key } => {
                write!(f, "metadata key '{key}' appears more than once")
            }
            E::InvalidHandle { what, index, place } => {
                write!(f, "{place}: {what} handle {index} is out of range")
            }
            E::EmptyGraphName => f.write_str("the graph has no name"),
            E::EmptyDeclarationName { list, index } => {
                write!(f, "{} {index} has an empty name", list_label(*list))
            }
            E::MissingType { list, value } => {
                write!(f, "{} '{value}' has no type", list_label(*list))
            }
            E::IncompleteType { list, value, field } => write!(
                f,
                "{} '{value}' has a type without its '{field}' field",
                list_label(*list)
            ),
            E::DuplicateInput { value } => {
                write!(f, "graph input '{value}' is declared more than once")
            }
            E::EmptyInitializerName { index } => write!(f, "initializer {index} has no name"),
            E::DuplicateInitializer { value } => {
                write!(f, "initializer '{value}' is defined more than once")
            }
            E::InitializerNotInput { value, ir_version } => write!(
                f,
                "initializer '{value}' is not a graph input (required below IR version 4; the model has {ir_version})"
            ),
            E::InvalidTensor { tensor, problem } => write!(f, "tensor '{tensor}' {problem}"),
            E::UndefinedInput { node, value } => {
                write!(f, "{node}: input '{value}' is not defined")
            }
            E::UseBeforeDefinition {
                node,
                value,
                producer,
            } => write!(
                f,
                "{node}: input '{value}' is used before {producer} defines it (nodes are not in topological order)"
            ),
            E::Cycle { node } => write!(f, "{node} is on a cycle"),
            E::DuplicateDefinition { node, value } => {
                write!(f, "{node}: output '{value}' is already defined (not SSA)")
            }
            E::ShadowsOuterName { node, value } => write!(
                f,
                "{node}: output '{value}' reuses a name of an enclosing graph"
            ),
            E::UndefinedOutput {
                value,
                from_outer_scope,
            } => {
                write!(f, "graph output '{value}' is not defined in this graph")?;
                if *from_outer_scope {
                    f.write_str(" (it is read from an enclosing graph; pass it through an Identity)")?;
                }
                Ok(())
            }
            E::EmptyOpType { node } => write!(f, "{node}: the node has no op_type"),
            E::NoInputsOrOutputs { node } => {
                write!(f, "{node}: the node has neither inputs nor outputs")
            }
            E::MissingOpsetImport { node, domain } => {
                write!(f, "{node}: no opset import for domain '{domain}'")
            }
            E::DuplicateAttribute { node, attribute } => {
                write!(f, "{node}: attribute '{attribute}' appears more than once")
            }
            E::EmptyAttributeName { node } => write!(f, "{node}: an attribute has no name"),
            E::AttributeWithoutType { node, attribute } => {
                write!(f, "{node}: attribute '{attribute}' has no type field")
            }
            E::AttributeTypeMismatch {
                node,
                attribute,
                declared,
                field,
            } => write!(
                f,
                "{node}: attribute '{attribute}' is declared {declared} but sets field '{field}'"
            ),
            E::AttributeMultipleValues {
                node,
                attribute,
                fields,
            } => write!(
                f,
                "{node}: attribute '{attribute}' sets more than one value field ({})",
                fields.join(", ")
            ),
            E::RefAttributeWithValue { node, attribute } => write!(
                f,
                "{node}: attribute '{attribute}' refers to a caller attribute but also has a value"
            ),
            E::EmptyFunctionName { index } => write!(f, "function {index} has no name"),
            E::FunctionWithoutDomain { function } => {
                write!(f, "function '{function}' has no domain field")
            }
            E::DuplicateFunction { function } => {
                write!(f, "function '{function}' is defined more than once")
            }
            E::DuplicateFunctionName {
                function,
                what,
                name,
            } => write!(f, "function '{function}' lists {what} '{name}' more than once"),
            E::FunctionCallCycle { cycle } => {
                write!(f, "model-local functions call each other in a cycle: {}", cycle.join(" -> "))
            }
            E::Schema {
                node,
                problem: problem @ SchemaProblem::InCall { .. },
            } => write!(f, "{node} {problem}"),
            E::Schema { node, problem } => write!(f, "{node}: {problem}"),
            E::SchemaTableUnavailable { reason } => write!(
                f,
                "the operator schema table is unavailable, nodes were not checked against schemas: {reason}"
            ),
            E::InSubgraph {
                node,
                attribute,
                graph_index,
                error,
            } => {
                write!(f, "{node} attribute '{attribute}'")?;
                if let Some(i) = graph_index {
                    write!(f, "[{i}]")?;
                }
                write!(f, ": {error}")
            }
            E::InFunction { function, error } => write!(f, "function '{function}': {error}"),
        }
    }
}

impl std::error::Error for CheckError {}
