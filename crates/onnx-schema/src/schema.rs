//! One operator schema version ([`OpSchema`]) and its parts: formal inputs and outputs,
//! attributes with defaults, type constraints, function bodies and context-dependent function
//! instances. All of it is read-only data from onnx's registry.

use onnx_proto::attribute_proto::AttributeType;
use std::sync::OnceLock;

use onnx_proto::{AttributeProto, FunctionProto, Message, NodeProto, TypeProto};

use crate::error::SchemaId;

/// Whether a formal input or output must be present once, may be absent, or repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ParamOption {
    /// Exactly one value.
    Single,
    /// Zero or one value; an absent optional input is written as the empty name "".
    Optional,
    /// One or more values (at least `min_arity`); only the last formal parameter can be variadic.
    Variadic,
}

/// onnx's support level of a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SupportLevel {
    /// A regular operator.
    Common,
    /// An experimental operator.
    Experimental,
}

/// Whether two nodes of this op with equal inputs and attributes produce equal outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeDeterminism {
    /// onnx does not say; treat as non-deterministic (onnx's `non_deterministic` is true here).
    Unknown,
    /// Random ops, and control flow whose bodies may contain them (If, Loop, Scan, ...).
    NonDeterministic,
    /// Pure: equal inputs and attributes give equal outputs.
    Deterministic,
}

/// Whose registry a schema comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SchemaOrigin {
    /// onnx's own registry (`data/schemas.json`, onnx 1.23.2): the standard.
    Onnx,
    /// onnxruntime's registry (`data/contrib_schemas.json`, onnxruntime 1.31.1): its contrib
    /// ops (`com.microsoft`) and the versions of onnx-domain ops onnx itself does not have
    /// (LayerNormalization-1, SimplifiedLayerNormalization-1, ...). A model that relies on one
    /// runs on onnxruntime but is not standard ONNX.
    OnnxRuntime,
}

/// A formal input or output of an operator.
#[derive(Debug, Clone, PartialEq)]
pub struct FormalParameter {
    /// The parameter's name in the specification (not a value name in a graph).
    pub name: String,
    /// Either a type parameter ("T", "T1", "Tind") bound by a [`TypeConstraint`], or a literal
    /// canonical type string such as "tensor(int64)".
    pub type_str: String,
    /// Single, optional or variadic.
    pub option: ParamOption,
    /// For a variadic parameter: whether every value must have the same type.
    pub is_homogeneous: bool,
    /// For a variadic parameter: the minimum number of values.
    pub min_arity: usize,
}

/// An attribute of an operator.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributeSchema {
    /// Attribute name.
    pub name: String,
    /// The attribute's type (the `onnx_proto` enum).
    pub ty: AttributeType,
    /// Whether a node must set the attribute.
    pub required: bool,
    /// The value used when a node omits the attribute, as onnx stores it (name, type and value
    /// set). `None` when the attribute has no default.
    pub default: Option<AttributeProto>,
}

/// The set of types a type parameter may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeConstraint {
    /// The type parameter, e.g. "T".
    pub type_param: String,
    /// Allowed canonical type strings, in onnx's declaration order.
    pub allowed: Vec<String>,
}

/// A context-dependent function body, instantiated by onnx's builder for one recorded context.
///
/// onnx builds these bodies from the node (attribute values are baked in as constants) and the
/// input types, so one body is only valid for nodes that match its context. The generator
/// instantiates each one for a few contexts: "all_inputs" (every input present, default
/// attributes, `tensor(float)` where allowed, else the first allowed type), "required_inputs"
/// (optional inputs absent) and a few named variants such as Gelu's "approximate=tanh". Ops whose
/// builder needs required attributes or shapes get fixed example values (see
/// `scripts/gen_schema.py`); they show in `node` and `input_types`.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionInstance {
    /// Which context this is: "all_inputs", "required_inputs", or a variant label.
    pub label: String,
    /// The node the body was built for (inputs named after the formal parameters, "" = absent).
    pub node: NodeProto,
    /// The type of each node input (`None` for an absent optional input).
    pub input_types: Vec<Option<TypeProto>>,
    /// The function body.
    pub body: FunctionProto,
}

/// Every instance of a context-dependent function for one function opset version. The
/// instances are kept encoded (checked when the table is parsed) and decoded on first use, so
/// the registry stays small: few programs ever read them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextDependentFunction {
    pub(crate) opset_version: i64,
    pub(crate) encoded: Vec<EncodedInstance>,
    pub(crate) decoded: OnceLock<Vec<FunctionInstance>>,
}

/// A [`FunctionInstance`] as protobuf bytes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EncodedInstance {
    pub(crate) label: String,
    pub(crate) node: Vec<u8>,
    pub(crate) input_types: Vec<Option<Vec<u8>>>,
    pub(crate) body: Vec<u8>,
}

impl ContextDependentFunction {
    /// The decoded instances. The bytes were decoded once when the table was parsed, so an
    /// instance that fails now cannot happen; it would be left out rather than panic.
    fn instances(&self) -> &[FunctionInstance] {
        self.decoded.get_or_init(|| {
            self.encoded
                .iter()
                .filter_map(|e| {
                    let input_types = e
                        .input_types
                        .iter()
                        .map(|t| t.as_deref().map(TypeProto::decode).transpose().ok())
                        .collect::<Option<Vec<_>>>()?;
                    Some(FunctionInstance {
                        label: e.label.clone(),
                        node: NodeProto::decode(e.node.as_slice()).ok()?,
                        input_types,
                        body: FunctionProto::decode(e.body.as_slice()).ok()?,
                    })
                })
                .collect()
        })
    }
}

/// One version of one operator schema: what `onnx.defs.get_schema(name, version, domain)` returns.
///
/// # Example
///
/// ```
/// use onnx_schema::{registry, ParamOption};
///
/// let conv = registry().lookup("", "Conv", 13).expect("Conv exists at opset 13");
/// assert_eq!(conv.since_version, 11);
/// assert_eq!(conv.inputs[2].name, "B");
/// assert_eq!(conv.inputs[2].option, ParamOption::Optional);
/// let auto_pad = conv.attribute("auto_pad").and_then(|a| a.default.as_ref());
/// assert_eq!(auto_pad.and_then(|a| a.s.as_deref()), Some(&b"NOTSET"[..]));
/// assert!(conv.allowed_types("T").unwrap().contains(&"tensor(float16)".to_string()));
///
/// // HardSwish-14 has a function body in terms of opset-14 operators.
/// let hard_swish = registry().lookup("ai.onnx", "HardSwish", 18).unwrap();
/// let body = hard_swish.function_body(18).unwrap();
/// assert!(body.node.iter().any(|n| n.op_type.as_deref() == Some("HardSigmoid")));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OpSchema {
    /// Operator domain: "" for the default ONNX domain (also spelled "ai.onnx"), "ai.onnx.ml", ...
    pub domain: String,
    /// Operator type, e.g. "Conv".
    pub name: String,
    /// The opset version of `domain` that introduced this schema version.
    pub since_version: i64,
    /// Deprecated schemas (Upsample-10, Scatter-11, ...) are still returned by lookups; onnx's
    /// checker rejects nodes that bind to them.
    pub deprecated: bool,
    /// Common or experimental.
    pub support_level: SupportLevel,
    /// Whether equal inputs give equal outputs (`Unknown` for every onnxruntime schema: its
    /// registry does not say).
    pub node_determinism: NodeDeterminism,
    /// Whose registry the schema comes from: onnx's, or onnxruntime's own.
    pub origin: SchemaOrigin,
    /// Minimum number of node inputs (counting trailing absent optional inputs as missing).
    pub min_input: usize,
    /// Maximum number of node inputs (`i32::MAX` when the last input is variadic).
    pub max_input: usize,
    /// Minimum number of node outputs.
    pub min_output: usize,
    /// Maximum number of node outputs (`i32::MAX` when the last output is variadic).
    pub max_output: usize,
    /// Formal inputs in order.
    pub inputs: Vec<FormalParameter>,
    /// Formal outputs in order.
    pub outputs: Vec<FormalParameter>,
    /// Attributes sorted by name (onnx's order).
    pub attributes: Vec<AttributeSchema>,
    /// Type constraints in declaration order.
    pub type_constraints: Vec<TypeConstraint>,
    /// Whether onnx has a type and shape inference function for this schema.
    pub has_type_and_shape_inference: bool,
    /// Whether onnx has a data propagation function (partial evaluation of shape values).
    pub has_data_propagation: bool,
    pub(crate) has_function: bool,
    pub(crate) has_context_dependent_function: bool,
    /// (function opset version, encoded body), sorted by version; decoded on request.
    pub(crate) function_bodies: Vec<(i64, Vec<u8>)>,
    /// Sorted by opset version.
    pub(crate) context_dependent_functions: Vec<ContextDependentFunction>,
}

impl OpSchema {
    /// The schema's identity, `domain:Name-since_version`, for messages.
    pub fn id(&self) -> SchemaId {
        SchemaId {
            domain: self.domain.clone(),
            name: self.name.clone(),
            since_version: self.since_version,
        }
    }

    /// The attribute named `name`, if the schema declares it.
    pub fn attribute(&self, name: &str) -> Option<&AttributeSchema> {
        self.attributes
            .binary_search_by(|a| a.name.as_str().cmp(name))
            .ok()
            .and_then(|i| self.attributes.get(i))
    }

    /// The formal input named `name`.
    pub fn input(&self, name: &str) -> Option<&FormalParameter> {
        self.inputs.iter().find(|p| p.name == name)
    }

    /// The formal output named `name`.
    pub fn output(&self, name: &str) -> Option<&FormalParameter> {
        self.outputs.iter().find(|p| p.name == name)
    }

    /// The types a formal parameter may take, given its `type_str`: the allowed list of the type
    /// constraint when it is a type parameter ("T"), or a one-element slice when it is a literal
    /// type used by one of this schema's parameters ("tensor(int64)"). `None` otherwise.
    pub fn allowed_types(&self, type_str_or_param: &str) -> Option<&[String]> {
        if let Some(tc) = self
            .type_constraints
            .iter()
            .find(|tc| tc.type_param == type_str_or_param)
        {
            return Some(&tc.allowed);
        }
        self.inputs
            .iter()
            .chain(&self.outputs)
            .find(|p| p.type_str == type_str_or_param)
            .map(|p| std::slice::from_ref(&p.type_str))
    }

    /// Whether the schema is onnxruntime's own rather than onnx's ([`SchemaOrigin::OnnxRuntime`]).
    pub fn is_onnxruntime(&self) -> bool {
        self.origin == SchemaOrigin::OnnxRuntime
    }

    /// Whether equal inputs and attributes always give equal outputs (false for random ops,
    /// control flow, and ops onnx does not classify).
    pub fn is_deterministic(&self) -> bool {
        self.node_determinism == NodeDeterminism::Deterministic
    }

    /// Whether onnx gives a context-independent function body (see [`Self::function_body`]).
    pub fn has_function(&self) -> bool {
        self.has_function
    }

    /// Whether onnx builds a function body from the node's attributes and input types (see
    /// [`Self::context_dependent_function_instances`]).
    pub fn has_context_dependent_function(&self) -> bool {
        self.has_context_dependent_function
    }

    /// The function opset versions for which onnx gives a context-independent body, ascending.
    pub fn function_opset_versions(&self) -> impl Iterator<Item = i64> + '_ {
        self.function_bodies.iter().map(|(v, _)| *v)
    }

    /// The context-independent function body for the highest function opset version not above
    /// `opset_version` (onnx's `get_function_with_opset_version`). The body's nodes use operators
    /// of that function opset version. `None` when the schema has no such body; context-dependent
    /// functions (LayerNormalization, Gelu, ...) are in
    /// [`Self::context_dependent_function_instances`] instead.
    pub fn function_body(&self, opset_version: i64) -> Option<FunctionProto> {
        let idx = self
            .function_bodies
            .partition_point(|(v, _)| *v <= opset_version);
        let (_, body) = self.function_bodies.get(idx.checked_sub(1)?)?;
        // Checked when the table was parsed.
        FunctionProto::decode(body.as_slice()).ok()
    }

    /// The function opset versions of the context-dependent function, ascending.
    pub fn context_dependent_function_opset_versions(&self) -> impl Iterator<Item = i64> + '_ {
        self.context_dependent_functions
            .iter()
            .map(|f| f.opset_version)
    }

    /// The recorded instances of the context-dependent function for the highest function opset
    /// version not above `opset_version`; empty when there is none.
    pub fn context_dependent_function_instances(&self, opset_version: i64) -> &[FunctionInstance] {
        let idx = self
            .context_dependent_functions
            .partition_point(|f| f.opset_version <= opset_version);
        idx.checked_sub(1)
            .and_then(|i| self.context_dependent_functions.get(i))
            .map_or(&[], |f| f.instances())
    }

    /// The context-dependent function instance with the given `label` ("all_inputs",
    /// "required_inputs", "approximate=tanh", ...) for the highest function opset version not
    /// above `opset_version`.
    pub fn context_dependent_function_instance(
        &self,
        opset_version: i64,
        label: &str,
    ) -> Option<&FunctionInstance> {
        self.context_dependent_function_instances(opset_version)
            .iter()
            .find(|i| i.label == label)
    }
}
