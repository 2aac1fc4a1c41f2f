//! Reading a JSON schema table written by `scripts/gen_schema.py` or
//! `scripts/gen_contrib_schema.py`: serde mirrors of the file
//! layout, then a checked conversion into [`OpSchema`]s that decodes every base64 protobuf field
//! and maps every enumerated string, reporting the schema and field of any bad value. Layer:
//! above `registry` and `schema` (it builds them); `registry` never imports it.

use std::collections::BTreeMap;

use base64::Engine as _;
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, FunctionProto, Message, NodeProto, TypeProto};
use serde::Deserialize;

use crate::error::{Error, Result, SchemaId};
use crate::registry::{OpsetRange, ReleaseVersions, SchemaRegistry};
use crate::schema::{
    AttributeSchema, ContextDependentFunction, EncodedInstance, FormalParameter, NodeDeterminism,
    OpSchema, ParamOption, SchemaOrigin, SupportLevel, TypeConstraint,
};

/// The table layout this crate reads; bump together with `FORMAT_VERSION` in the generator.
pub(crate) const FORMAT_VERSION: i64 = 1;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableJson {
    format_version: i64,
    onnx_version: String,
    /// Present in onnxruntime's table (`scripts/gen_contrib_schema.py`): its schemas are
    /// [`SchemaOrigin::OnnxRuntime`].
    #[serde(default)]
    onnxruntime_version: Option<String>,
    opset_versions: BTreeMap<String, OpsetRangeJson>,
    version_table: Vec<ReleaseJson>,
    schemas: Vec<SchemaJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpsetRangeJson {
    min: i64,
    max: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseJson {
    release: String,
    ir_version: i64,
    #[serde(rename = "ai.onnx")]
    ai_onnx: i64,
    #[serde(rename = "ai.onnx.ml")]
    ai_onnx_ml: i64,
    #[serde(rename = "ai.onnx.training")]
    ai_onnx_training: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SchemaJson {
    domain: String,
    name: String,
    since_version: i64,
    deprecated: bool,
    support_level: String,
    node_determinism: String,
    min_input: i64,
    max_input: i64,
    min_output: i64,
    max_output: i64,
    inputs: Vec<ParamJson>,
    outputs: Vec<ParamJson>,
    attributes: Vec<AttributeJson>,
    type_constraints: Vec<TypeConstraintJson>,
    has_function: bool,
    has_context_dependent_function: bool,
    has_type_and_shape_inference_function: bool,
    has_data_propagation_function: bool,
    function_bodies: Vec<FunctionBodyJson>,
    context_dependent_functions: Vec<ContextFunctionJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamJson {
    name: String,
    type_str: String,
    option: String,
    is_homogeneous: bool,
    min_arity: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttributeJson {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    required: bool,
    default: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypeConstraintJson {
    type_param: String,
    allowed: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionBodyJson {
    opset_version: i64,
    body: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextFunctionJson {
    opset_version: i64,
    instances: Vec<InstanceJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstanceJson {
    label: String,
    node: String,
    input_types: Vec<Option<String>>,
    body: String,
}

impl SchemaRegistry {
    /// Parses a schema table in the format `scripts/gen_schema.py` and
    /// `scripts/gen_contrib_schema.py` write. Checks every enum value, number range, base64
    /// field and embedded protobuf message, and that no schema version appears twice. A table
    /// with an `onnxruntime_version` key gives [`SchemaOrigin::OnnxRuntime`] schemas.
    ///
    /// [`SchemaOrigin::OnnxRuntime`]: crate::SchemaOrigin::OnnxRuntime
    pub fn from_json(json: &str) -> Result<Self> {
        parse_registry(json)
    }
}

/// Parses and checks a whole table.
pub(crate) fn parse_registry(json: &str) -> Result<SchemaRegistry> {
    let table: TableJson = serde_json::from_str(json).map_err(|source| Error::Json { source })?;
    if table.format_version != FORMAT_VERSION {
        return Err(Error::FormatVersion {
            found: table.format_version,
            expected: FORMAT_VERSION,
        });
    }
    let opsets = table
        .opset_versions
        .into_iter()
        .map(|(domain, r)| {
            (
                domain,
                OpsetRange {
                    min: r.min,
                    max: r.max,
                },
            )
        })
        .collect();
    let releases = table
        .version_table
        .into_iter()
        .map(|r| ReleaseVersions {
            release: r.release,
            ir_version: r.ir_version,
            ai_onnx: r.ai_onnx,
            ai_onnx_ml: r.ai_onnx_ml,
            ai_onnx_training: r.ai_onnx_training,
        })
        .collect();
    let origin = match table.onnxruntime_version {
        Some(_) => SchemaOrigin::OnnxRuntime,
        None => SchemaOrigin::Onnx,
    };
    let schemas = table
        .schemas
        .into_iter()
        .map(|s| convert_schema(s, origin))
        .collect::<Result<Vec<_>>>()?;
    SchemaRegistry::from_parts(
        schemas,
        opsets,
        releases,
        table.onnx_version,
        table.onnxruntime_version,
    )
}

/// Context for converting one schema: its id, for error messages.
struct Ctx {
    id: SchemaId,
}

impl Ctx {
    fn unknown(&self, field: impl Into<String>, value: &str) -> Error {
        Error::UnknownValue {
            schema: self.id.clone(),
            field: field.into(),
            value: value.to_string(),
        }
    }

    fn count(&self, field: &str, value: i64) -> Result<usize> {
        usize::try_from(value).map_err(|_| Error::OutOfRange {
            schema: self.id.clone(),
            field: field.to_string(),
            value,
        })
    }

    fn version(&self, field: &str, value: i64) -> Result<i64> {
        if value >= 1 {
            Ok(value)
        } else {
            Err(Error::OutOfRange {
                schema: self.id.clone(),
                field: field.to_string(),
                value,
            })
        }
    }

    fn decode<M: Message + Default>(
        &self,
        field: impl Into<String>,
        message: &'static str,
        b64: &str,
    ) -> Result<M> {
        let field = field.into();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|source| Error::Base64 {
                schema: self.id.clone(),
                field: field.clone(),
                source,
            })?;
        M::decode(bytes.as_slice()).map_err(|source| Error::Decode {
            schema: self.id.clone(),
            field,
            message,
            source,
        })
    }

    /// The base64-decoded bytes of a message, checked to decode as `M` (then dropped: the
    /// registry keeps bytes and decodes on use).
    fn checked<M: Message + Default>(
        &self,
        field: impl Into<String>,
        message: &'static str,
        b64: &str,
    ) -> Result<Vec<u8>> {
        let field = field.into();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|source| Error::Base64 {
                schema: self.id.clone(),
                field: field.clone(),
                source,
            })?;
        M::decode(bytes.as_slice()).map_err(|source| Error::Decode {
            schema: self.id.clone(),
            field,
            message,
            source,
        })?;
        Ok(bytes)
    }

    /// Checks that versions are strictly increasing.
    fn ascending(&self, field: &str, versions: impl Iterator<Item = i64>) -> Result<()> {
        let mut previous = None;
        for v in versions {
            if previous.is_some_and(|p| p >= v) {
                return Err(Error::Inconsistent {
                    schema: self.id.clone(),
                    reason: format!("{field}: opset versions are not strictly increasing at {v}"),
                });
            }
            previous = Some(v);
        }
        Ok(())
    }
}

fn convert_schema(s: SchemaJson, origin: SchemaOrigin) -> Result<OpSchema> {
    let ctx = Ctx {
        id: SchemaId {
            domain: s.domain.clone(),
            name: s.name.clone(),
            since_version: s.since_version,
        },
    };
    ctx.version("since_version", s.since_version)?;
    let support_level = match s.support_level.as_str() {
        "COMMON" => SupportLevel::Common,
        "EXPERIMENTAL" => SupportLevel::Experimental,
        other => return Err(ctx.unknown("support_level", other)),
    };
    let node_determinism = match s.node_determinism.as_str() {
        "Unknown" => NodeDeterminism::Unknown,
        "NonDeterministic" => NodeDeterminism::NonDeterministic,
        "Deterministic" => NodeDeterminism::Deterministic,
        other => return Err(ctx.unknown("node_determinism", other)),
    };
    let inputs = convert_params(&ctx, "inputs", s.inputs)?;
    let outputs = convert_params(&ctx, "outputs", s.outputs)?;
    let attributes = s
        .attributes
        .into_iter()
        .map(|a| convert_attribute(&ctx, a))
        .collect::<Result<Vec<_>>>()?;
    if let Some(pair) = attributes.windows(2).find(|w| w[0].name >= w[1].name) {
        return Err(Error::Inconsistent {
            schema: ctx.id.clone(),
            reason: format!("attributes are not sorted by name at '{}'", pair[1].name),
        });
    }
    let type_constraints = s
        .type_constraints
        .into_iter()
        .map(|tc| TypeConstraint {
            type_param: tc.type_param,
            allowed: tc.allowed,
        })
        .collect();
    let function_bodies = s
        .function_bodies
        .into_iter()
        .map(|f| {
            let v = ctx.version("function_bodies.opset_version", f.opset_version)?;
            let field = format!("function_bodies[{v}]");
            Ok((
                v,
                ctx.checked::<FunctionProto>(field, "FunctionProto", &f.body)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    ctx.ascending("function_bodies", function_bodies.iter().map(|(v, _)| *v))?;
    let context_dependent_functions = s
        .context_dependent_functions
        .into_iter()
        .map(|f| convert_context_function(&ctx, f))
        .collect::<Result<Vec<_>>>()?;
    ctx.ascending(
        "context_dependent_functions",
        context_dependent_functions.iter().map(|f| f.opset_version),
    )?;
    Ok(OpSchema {
        support_level,
        node_determinism,
        origin,
        deprecated: s.deprecated,
        min_input: ctx.count("min_input", s.min_input)?,
        max_input: ctx.count("max_input", s.max_input)?,
        min_output: ctx.count("min_output", s.min_output)?,
        max_output: ctx.count("max_output", s.max_output)?,
        inputs,
        outputs,
        attributes,
        type_constraints,
        has_type_and_shape_inference: s.has_type_and_shape_inference_function,
        has_data_propagation: s.has_data_propagation_function,
        has_function: s.has_function,
        has_context_dependent_function: s.has_context_dependent_function,
        function_bodies,
        context_dependent_functions,
        domain: s.domain,
        name: s.name,
        since_version: s.since_version,
    })
}

fn convert_params(ctx: &Ctx, field: &str, params: Vec<ParamJson>) -> Result<Vec<FormalParameter>> {
    params
        .into_iter()
        .map(|p| {
            let option = match p.option.as_str() {
                "Single" => ParamOption::Single,
                "Optional" => ParamOption::Optional,
                "Variadic" => ParamOption::Variadic,
                other => return Err(ctx.unknown(format!("{field}.{}.option", p.name), other)),
            };
            Ok(FormalParameter {
                min_arity: ctx.count(&format!("{field}.{}.min_arity", p.name), p.min_arity)?,
                name: p.name,
                type_str: p.type_str,
                option,
                is_homogeneous: p.is_homogeneous,
            })
        })
        .collect()
}

fn convert_attribute(ctx: &Ctx, a: AttributeJson) -> Result<AttributeSchema> {
    let field = format!("attributes.{}", a.name);
    let ty = AttributeType::from_str_name(&a.ty)
        .filter(|t| *t != AttributeType::Undefined)
        .ok_or_else(|| ctx.unknown(format!("{field}.type"), &a.ty))?;
    let default = match &a.default {
        Some(b64) => {
            Some(ctx.decode::<AttributeProto>(format!("{field}.default"), "AttributeProto", b64)?)
        }
        None => None,
    };
    Ok(AttributeSchema {
        name: a.name,
        ty,
        required: a.required,
        default,
    })
}

fn convert_context_function(ctx: &Ctx, f: ContextFunctionJson) -> Result<ContextDependentFunction> {
    let opset_version =
        ctx.version("context_dependent_functions.opset_version", f.opset_version)?;
    let encoded = f
        .instances
        .into_iter()
        .map(|i| {
            let field = format!("context_dependent_functions[{opset_version}].{}", i.label);
            let input_types = i
                .input_types
                .iter()
                .enumerate()
                .map(|(n, t)| {
                    t.as_deref()
                        .map(|b64| {
                            ctx.checked::<TypeProto>(
                                format!("{field}.input_types[{n}]"),
                                "TypeProto",
                                b64,
                            )
                        })
                        .transpose()
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(EncodedInstance {
                node: ctx.checked::<NodeProto>(format!("{field}.node"), "NodeProto", &i.node)?,
                body: ctx.checked::<FunctionProto>(
                    format!("{field}.body"),
                    "FunctionProto",
                    &i.body,
                )?,
                input_types,
                label: i.label,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ContextDependentFunction {
        opset_version,
        encoded,
        decoded: std::sync::OnceLock::new(),
    })
}
