//! No input makes inference panic: every schema version of the registry is run on hostile
//! nodes (extreme and negative dims, ranks 0 to 5, extreme attribute values, extreme constant
//! values), and each call must return `Ok` with one entry per output, or an `Err`.

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, GraphProto, TypeProto};
use onnx_schema::infer::{infer_node, tensor_type, InputInfo, SymDim};
use onnx_schema::{element_type_from_name, registry, OpSchema, ParamOption};

use crate::support::int64s;

/// Shapes that stress the rules.
fn hostile_shapes() -> Vec<Vec<SymDim>> {
    let k = SymDim::Known;
    vec![
        vec![],
        vec![k(0)],
        vec![k(-3), k(5)],
        vec![k(i64::MAX), k(2), k(i64::MAX)],
        vec![k(1), k(1), k(1), k(1), k(1)],
        vec![SymDim::Param("p".into()), SymDim::Unknown, k(3), k(4)],
        vec![k(2), k(3), k(4), k(5)],
    ]
}

/// An attribute of the schema's type with an extreme value.
fn hostile_attribute(name: &str, ty: AttributeType, variant: usize) -> AttributeProto {
    let ints = [i64::MAX, i64::MIN, -1, 0, 3];
    let pick = ints.get(variant % ints.len()).copied().unwrap_or(0);
    let mut attr = AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    match ty {
        AttributeType::Int => attr.i = Some(pick),
        AttributeType::Ints => attr.ints = vec![pick, -1, i64::MAX, 0],
        AttributeType::Float => attr.f = Some(f32::NAN),
        AttributeType::Floats => attr.floats = vec![f32::INFINITY, -1.0, 0.0],
        AttributeType::String => attr.s = Some(b"SAME_UPPER".to_vec().into()),
        AttributeType::Strings => attr.strings = vec![b"".to_vec().into()],
        AttributeType::Tensor => attr.t = Some(int64s(&[2], &[pick, -1])),
        AttributeType::Graph => attr.g = Some(GraphProto::default()),
        _ => {}
    }
    attr
}

/// A type the schema allows for formal input `type_str` (a tensor one when there is one).
fn allowed_tensor_elem(schema: &OpSchema, type_str: &str) -> Option<i32> {
    let allowed = schema.allowed_types(type_str)?;
    allowed.iter().find_map(|t| {
        let name = t.strip_prefix("tensor(")?.strip_suffix(')')?;
        element_type_from_name(name).map(|d| d as i32)
    })
}

fn run_case(schema: &OpSchema, variant: usize) -> Result<(), String> {
    let shapes = hostile_shapes();
    let n_inputs = schema.inputs.len()
        + usize::from(
            schema
                .inputs
                .last()
                .is_some_and(|p| p.option == ParamOption::Variadic),
        );
    let types: Vec<TypeProto> = (0..n_inputs)
        .map(|i| {
            let formal = schema.inputs.get(i).or(schema.inputs.last());
            let elem = formal.and_then(|f| allowed_tensor_elem(schema, &f.type_str));
            let shape = shapes
                .get((i + variant) % shapes.len())
                .cloned()
                .unwrap_or_default();
            tensor_type(elem.or(Some(1)), Some(&shape))
        })
        .collect();
    let constant = int64s(&[4], &[i64::MIN, i64::MAX, -1, 0]);
    let sym = [
        SymDim::Known(i64::MAX),
        SymDim::Known(-5),
        SymDim::Param("p".into()),
    ];
    let inputs: Vec<Option<InputInfo<'_>>> = types
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            Some(match (i + variant) % 3 {
                0 => InputInfo::typed(ty),
                1 => InputInfo::constant(None, &constant),
                _ => InputInfo::symbolic(Some(ty), &sym),
            })
        })
        .collect();
    let attrs: Vec<AttributeProto> = schema
        .attributes
        .iter()
        .map(|a| hostile_attribute(&a.name, a.ty, variant))
        .collect();
    let n_outputs = schema.outputs.len().max(1);
    match infer_node(schema, schema.since_version, &attrs, &inputs, n_outputs) {
        Ok(outs) if outs.len() != n_outputs => Err(format!(
            "{}: {} outputs for {n_outputs}",
            schema.id(),
            outs.len()
        )),
        _ => Ok(()),
    }
}

#[test]
fn hostile_nodes_never_panic() {
    let mut failures = Vec::new();
    let mut cases = 0;
    for schema in registry().iter() {
        for variant in 0..7 {
            cases += 1;
            let outcome = std::panic::catch_unwind(|| run_case(schema, variant));
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(e),
                Err(_) => failures.push(format!("{} (variant {variant}) panicked", schema.id())),
            }
        }
    }
    assert!(cases > 3000, "ran only {cases} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn empty_tensor_constants_read_as_empty_values() {
    // A [0]-shaped axes input is known to be empty even without a value.
    let x = tensor_type(Some(1), Some(&[SymDim::Known(2), SymDim::Known(3)]));
    let axes = tensor_type(Some(7), Some(&[SymDim::Known(0)]));
    let schema = registry()
        .lookup("", "ReduceSum", 18)
        .expect("ReduceSum-13");
    let outs = infer_node(
        schema,
        18,
        &[],
        &[Some(InputInfo::typed(&x)), Some(InputInfo::typed(&axes))],
        1,
    )
    .expect("consistent");
    let want = tensor_type(Some(1), Some(&[SymDim::Known(1), SymDim::Known(1)]));
    assert_eq!(outs.first().and_then(|o| o.ty.clone()), Some(want));
}
