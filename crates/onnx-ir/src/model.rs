//! The model: opset imports, model metadata, the main graph, model-local functions, and the
//! parts kept as protobuf messages (training info, device configurations).

use onnx_proto::{
    AttributeProto, DeviceConfigurationProto, StringStringEntryProto, TrainingInfoProto,
};

use crate::graph::Graph;
use crate::name::Name;

/// Which optional fields of an opset import were present in the proto. Only `to_proto`
/// reads it: a non-empty domain or non-zero version is always written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct OpsetFieldPresence {
    /// `domain` was present.
    pub domain: bool,
    /// `version` was present.
    pub version: bool,
}

/// One entry of `opset_import`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OpsetImport {
    /// The domain as written ("" and "ai.onnx" both mean the ONNX domain).
    pub domain: Name,
    /// The opset version (0 when the proto had none).
    pub version: i64,
    /// Presence of empty fields, for a byte-exact round trip.
    pub field_presence: OpsetFieldPresence,
}

impl OpsetImport {
    /// An import of `domain` at `version`, written with both fields.
    pub fn new(domain: impl Into<Name>, version: i64) -> Self {
        OpsetImport {
            domain: domain.into(),
            version,
            field_presence: OpsetFieldPresence {
                domain: true,
                version: true,
            },
        }
    }
}

/// True when two domain spellings name the same domain ("" and "ai.onnx" are one).
pub fn same_domain(a: &str, b: &str) -> bool {
    fn canonical(d: &str) -> &str {
        if d == "ai.onnx" {
            ""
        } else {
            d
        }
    }
    canonical(a) == canonical(b)
}

/// The version imported for `domain` by a list of imports ("" == "ai.onnx"); the first
/// import of the domain wins when an (invalid) list repeats it.
pub fn opset_version_in(imports: &[OpsetImport], domain: &str) -> Option<i64> {
    imports
        .iter()
        .find(|i| *i.domain == *domain)
        .or_else(|| imports.iter().find(|i| same_domain(&i.domain, domain)))
        .map(|i| i.version)
}

/// A model-local function (`FunctionProto`). Its body is a [`Graph`] whose inputs and
/// outputs are the function's formal inputs and outputs and whose value_info is the
/// function's value_info; the graph's own name, doc string, initializers and metadata stay
/// empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Function {
    /// The function's name.
    pub name: Option<Name>,
    /// The function's domain.
    pub domain: Option<Name>,
    /// The overload this implementation provides.
    pub overload: Option<Name>,
    /// Names of the attributes the function takes (without defaults).
    pub attributes: Vec<Name>,
    /// Attributes the function takes with default values, as in the file.
    pub attribute_protos: Vec<AttributeProto>,
    /// The function's own opset imports.
    pub opset_imports: Vec<OpsetImport>,
    /// The body.
    pub body: Graph,
    /// The function's doc string.
    pub doc_string: Option<String>,
    /// The function's metadata.
    pub metadata_props: Vec<StringStringEntryProto>,
}

impl Function {
    /// The id nodes use to call it: (domain, name, overload), absent fields as "".
    pub fn id(&self) -> (&str, &str, &str) {
        (
            self.domain.as_deref().unwrap_or(""),
            self.name.as_deref().unwrap_or(""),
            self.overload.as_deref().unwrap_or(""),
        )
    }

    /// The version this function imports for `domain` ("" == "ai.onnx").
    pub fn opset_version(&self, domain: &str) -> Option<i64> {
        opset_version_in(&self.opset_imports, domain)
    }
}

/// An ONNX model in IR form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    /// The IR version.
    pub ir_version: Option<i64>,
    /// The opset imports, in file order.
    pub opset_imports: Vec<OpsetImport>,
    /// The producing tool.
    pub producer_name: Option<String>,
    /// The producing tool's version.
    pub producer_version: Option<String>,
    /// The model's namespace domain.
    pub domain: Option<String>,
    /// The model's version.
    pub model_version: Option<i64>,
    /// The model's doc string.
    pub doc_string: Option<String>,
    /// The model's metadata.
    pub metadata_props: Vec<StringStringEntryProto>,
    /// The main graph.
    pub graph: Graph,
    /// False only for a model whose proto has no `graph` field at all.
    pub has_graph: bool,
    /// Model-local functions.
    pub functions: Vec<Function>,
    /// Training information, kept as in the file.
    pub training_info: Vec<TrainingInfoProto>,
    /// Multi-device configurations, kept as in the file.
    pub configuration: Vec<DeviceConfigurationProto>,
}

impl Model {
    /// A model around a graph, with the given opset imports and IR version.
    pub fn new(ir_version: i64, opset_imports: Vec<OpsetImport>, graph: Graph) -> Self {
        Model {
            ir_version: Some(ir_version),
            opset_imports,
            graph,
            has_graph: true,
            ..Model::default()
        }
    }

    /// The opset version imported for `domain` ("" == "ai.onnx").
    pub fn opset_version(&self, domain: &str) -> Option<i64> {
        opset_version_in(&self.opset_imports, domain)
    }

    /// The model-local function a node with this domain, op type and overload calls.
    pub fn function(&self, domain: &str, op_type: &str, overload: &str) -> Option<&Function> {
        self.functions
            .iter()
            .find(|f| f.id() == (domain, op_type, overload))
    }
}
