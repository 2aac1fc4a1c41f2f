//! [`SchemaProblem`]: what an operator schema (or the signature of a model-local function)
//! finds wrong with a node. Wrapped in [`CheckError::Schema`](crate::CheckError::Schema), which
//! prefixes the node, so a message reads
//! `node 4 'mul_1' (Mul): input 2 given but Mul-14 takes at most 2 inputs`.

use std::fmt;

use crate::name::Name;

/// Which side of a node a problem concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Port {
    /// The node's inputs.
    Input,
    /// The node's outputs.
    Output,
}

impl Port {
    fn singular(self) -> &'static str {
        match self {
            Port::Input => "input",
            Port::Output => "output",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Port::Input => "inputs",
            Port::Output => "outputs",
        }
    }

    /// "input" for a count of 1, "inputs" otherwise.
    fn noun(self, count: usize) -> &'static str {
        if count == 1 {
            self.singular()
        } else {
            self.plural()
        }
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.singular())
    }
}

/// One problem a schema or function signature finds with a node. `callee` fields name what the
/// node binds to: `Mul-14` for the ONNX domain, `ai.onnx.ml:Normalizer-1` for other domains,
/// `function 'custom:F'` for a model-local function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaProblem {
    /// No version of the operator exists in a domain onnx defines.
    UnknownOperator {
        /// The operator.
        op_type: Name,
        /// The domain as the node writes it.
        domain: Name,
        /// The opset version the node's domain is imported at.
        opset: i64,
    },
    /// The operator exists, but only from a later opset version than the one imported.
    NotAvailableAtOpset {
        /// The operator.
        op_type: Name,
        /// The domain as the node writes it.
        domain: Name,
        /// The opset version imported.
        opset: i64,
        /// The first opset version that has the operator.
        introduced: i64,
    },
    /// A warning, not an error: a node of an onnx domain binds to a schema only onnxruntime
    /// registers (its LayerNormalization-1 or SimplifiedLayerNormalization-1 below opset 17,
    /// ...). onnxruntime runs the model; onnx's checker and other runtimes reject it.
    OnnxRuntimeOnly {
        /// The schema, e.g. `LayerNormalization-1`.
        callee: String,
        /// The opset version imported.
        opset: i64,
    },
    /// The schema the node binds to at the imported opset is deprecated.
    Deprecated {
        /// The schema, e.g. `Upsample-10`.
        callee: String,
        /// The opset version imported.
        opset: i64,
    },
    /// Fewer inputs or outputs than the callee needs.
    TooFew {
        /// Inputs or outputs.
        port: Port,
        /// The schema or function.
        callee: String,
        /// The minimum.
        min: usize,
        /// How many the node has (absent optional ones included).
        given: usize,
    },
    /// More inputs or outputs than the callee takes.
    TooMany {
        /// Inputs or outputs.
        port: Port,
        /// The schema or function.
        callee: String,
        /// The maximum.
        max: usize,
        /// How many the node has.
        given: usize,
    },
    /// A count inside the range that the schema still does not allow (BatchNormalization
    /// takes 1 or 3 outputs, not 2).
    CountNotAllowed {
        /// Inputs or outputs.
        port: Port,
        /// The schema.
        callee: String,
        /// The counts it allows, ascending.
        allowed: Vec<usize>,
        /// How many the node has.
        given: usize,
    },
    /// A required (single) input or output given as the empty name.
    RequiredIsEmpty {
        /// Inputs or outputs.
        port: Port,
        /// Position on the node.
        index: usize,
        /// The formal parameter's name.
        param: String,
        /// The schema.
        callee: String,
    },
    /// An attribute the callee does not declare.
    UnknownAttribute {
        /// The attribute.
        attribute: Name,
        /// The schema or function.
        callee: String,
    },
    /// An attribute whose `type` field is not the type the schema declares.
    AttributeTypeMismatch {
        /// The attribute.
        attribute: Name,
        /// The schema.
        callee: String,
        /// The type the schema declares, e.g. "FLOAT".
        expected: String,
        /// The type the node declares ("UNDEFINED" when the field is absent).
        actual: String,
    },
    /// An attribute of the right type whose value field is not set (a TENSOR without `t`).
    AttributeValueMissing {
        /// The attribute.
        attribute: Name,
        /// Its type, e.g. "TENSOR".
        ty: String,
        /// The field that should hold the value.
        field: &'static str,
    },
    /// A required attribute the node does not set.
    MissingRequiredAttribute {
        /// The attribute.
        attribute: String,
        /// The schema.
        callee: String,
    },
    /// A value whose type (declared, or inferred for an input the model does not type) the
    /// type constraint of its formal parameter does not allow.
    TypeNotAllowed {
        /// Input or output.
        port: Port,
        /// Position on the node.
        index: usize,
        /// The value's name.
        value: Name,
        /// Its type, e.g. "tensor(int32)".
        type_str: String,
        /// The formal parameter's name, e.g. "X".
        param: String,
        /// The type parameter or literal type of the formal parameter, e.g. "T".
        type_param: String,
        /// The schema.
        callee: String,
        /// The model declares no type for the value: `type_str` is the inferred one.
        inferred: bool,
    },
    /// A value whose type differs from another value bound to the same type parameter.
    InconsistentType {
        /// Input or output.
        port: Port,
        /// Position on the node.
        index: usize,
        /// The value's name.
        value: Name,
        /// Its type.
        type_str: String,
        /// The type parameter, e.g. "T".
        type_param: String,
        /// The type the parameter already has.
        bound: String,
        /// Where the parameter got it.
        bound_by: (Port, usize),
        /// The schema.
        callee: String,
    },
    /// onnx's full check expands the function body of an op that has no type inference of its
    /// own; the body reads an attribute the node omits and gives no default, so a body node is
    /// left without a value it needs.
    UnboundBodyAttribute {
        /// The node's attribute the body refers to.
        attribute: String,
        /// The schema.
        callee: String,
        /// The opset version of the body onnx expands.
        body_opset: i64,
        /// Position of the body node left incomplete.
        body_node: usize,
        /// Its operator.
        body_op: String,
    },
    /// A problem in the body of a model-local function the node calls, found with the types
    /// that call gives the body (its inputs typed as the call's, inferred through it), as
    /// onnx's full check infers into the function at each call before checking its nodes.
    InCall {
        /// The function called: `domain:name`, with `:overload` when there is one.
        function: String,
        /// Where the body node is: `node 0 'f2' (f2)`, after the path to it when it sits in a
        /// subgraph of the body (`node 3 (If), then_branch, node 0 (Acosh)`).
        at: String,
        /// The problem there.
        problem: Box<SchemaProblem>,
    },
}

/// "'ai.onnx'" for the default domain, the domain itself otherwise.
struct DomainLabel<'a>(&'a str);

impl fmt::Display for DomainLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("ai.onnx")
        } else {
            f.write_str(self.0)
        }
    }
}

fn join_counts(counts: &[usize]) -> String {
    let texts: Vec<String> = counts.iter().map(usize::to_string).collect();
    match texts.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

impl SchemaProblem {
    /// Whether this is a warning (the model passes the check) rather than an error.
    pub fn is_warning(&self) -> bool {
        matches!(self, SchemaProblem::OnnxRuntimeOnly { .. })
    }
}

impl fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SchemaProblem as P;
        match self {
            P::InCall {
                function,
                at,
                problem,
            } => {
                let sep = if matches!(**problem, P::InCall { .. }) {
                    " "
                } else {
                    ": "
                };
                write!(f, "calls {function}, whose {at}{sep}{problem}")
            }
            P::UnknownOperator {
                op_type,
                domain,
                opset,
            } => write!(
                f,
                "{op_type} is not an operator of domain '{}' (imported at opset {opset})",
                DomainLabel(domain)
            ),
            P::NotAvailableAtOpset {
                op_type,
                domain,
                opset,
                introduced,
            } => write!(
                f,
                "{op_type} is not available at opset {opset} of domain '{}' (introduced in opset {introduced})",
                DomainLabel(domain)
            ),
            P::Deprecated { callee, opset } => {
                write!(f, "{callee} is deprecated at opset {opset}")
            }
            P::OnnxRuntimeOnly { callee, opset } => write!(
                f,
                "warning: at opset {opset} this op leans on onnxruntime's registry: {callee} is \
                 onnxruntime's own schema, not standard ONNX (other runtimes reject it)"
            ),
            P::TooFew {
                port,
                callee,
                min,
                given,
            } => write!(
                f,
                "{given} {} given but {callee} needs at least {min}",
                port.noun(*given)
            ),
            P::TooMany {
                port,
                callee,
                max,
                given,
            } => {
                if given.saturating_sub(*max) == 1 {
                    write!(f, "{port} {max} given")?;
                } else {
                    write!(f, "{} {max} to {} given", port.plural(), given - 1)?;
                }
                write!(f, " but {callee} takes at most {max} {}", port.noun(*max))
            }
            P::CountNotAllowed {
                port,
                callee,
                allowed,
                given,
            } => write!(
                f,
                "{given} {} given but {callee} takes {} {}",
                port.noun(*given),
                join_counts(allowed),
                port.plural()
            ),
            P::RequiredIsEmpty {
                port,
                index,
                param,
                callee,
            } => write!(
                f,
                "{port} {index} ({param}) of {callee} is required but given as \"\""
            ),
            P::UnknownAttribute { attribute, callee } => {
                write!(f, "attribute '{attribute}' is not an attribute of {callee}")
            }
            P::AttributeTypeMismatch {
                attribute,
                callee,
                expected,
                actual,
            } => write!(
                f,
                "attribute '{attribute}' has type {actual} but {callee} declares it {expected}"
            ),
            P::AttributeValueMissing {
                attribute,
                ty,
                field,
            } => write!(
                f,
                "attribute '{attribute}' has type {ty} but no value in field '{field}'"
            ),
            P::MissingRequiredAttribute { attribute, callee } => {
                write!(f, "{callee} requires attribute '{attribute}'")
            }
            P::TypeNotAllowed {
                port,
                index,
                value,
                type_str,
                param,
                type_param,
                callee,
                inferred,
            } => write!(
                f,
                "{port} {index} '{value}' has type {type_str}{}, which {callee} does not allow for {param} ({type_param})",
                if *inferred { " (inferred: the model declares none)" } else { "" }
            ),
            P::InconsistentType {
                port,
                index,
                value,
                type_str,
                type_param,
                bound,
                bound_by,
                callee,
            } => write!(
                f,
                "{port} {index} '{value}' has type {type_str} but {type_param} of {callee} is already {bound} (from {} {})",
                bound_by.0, bound_by.1
            ),
            P::UnboundBodyAttribute {
                attribute,
                callee,
                body_opset,
                body_node,
                body_op,
            } => write!(
                f,
                "attribute '{attribute}' is not set and the function body of {callee} (opset {body_opset}) gives no default for it, \
                 so body node {body_node} ({body_op}) has no value; onnx.checker's full check expands this body: set '{attribute}' explicitly"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_ports_read_as_sentences() {
        let many = SchemaProblem::TooMany {
            port: Port::Input,
            callee: "Mul-14".into(),
            max: 2,
            given: 3,
        };
        assert_eq!(
            many.to_string(),
            "input 2 given but Mul-14 takes at most 2 inputs"
        );
        let several = SchemaProblem::TooMany {
            port: Port::Output,
            callee: "Relu-14".into(),
            max: 1,
            given: 3,
        };
        assert_eq!(
            several.to_string(),
            "outputs 1 to 2 given but Relu-14 takes at most 1 output"
        );
        let allowed = SchemaProblem::CountNotAllowed {
            port: Port::Output,
            callee: "BatchNormalization-15".into(),
            allowed: vec![1, 3],
            given: 2,
        };
        assert_eq!(
            allowed.to_string(),
            "2 outputs given but BatchNormalization-15 takes 1 or 3 outputs"
        );
        let unknown = SchemaProblem::UnknownOperator {
            op_type: "Foo".into(),
            domain: "".into(),
            opset: 17,
        };
        assert_eq!(
            unknown.to_string(),
            "Foo is not an operator of domain 'ai.onnx' (imported at opset 17)"
        );
    }
}
