//! Function bodies: context-independent ones (`function_body`) and the recorded instances of
//! context-dependent ones.

use onnx_proto::FunctionProto;
use onnx_schema::{registry, type_str_of};

use crate::schema;

fn op_types(body: &FunctionProto) -> Vec<&str> {
    body.node
        .iter()
        .map(|n| n.op_type.as_deref().unwrap_or_default())
        .collect()
}

fn opset_of(body: &FunctionProto, domain: &str) -> Option<i64> {
    body.opset_import
        .iter()
        .find(|o| o.domain.as_deref().unwrap_or_default() == domain)
        .and_then(|o| o.version)
}

#[test]
fn hard_swish_body_is_hard_sigmoid_times_x() {
    // onnx: get_schema("HardSwish", 14).function_opset_versions == [14], and its body's nodes
    // are [HardSigmoid, Mul].
    let hard_swish = schema("", "HardSwish", 14);
    assert!(hard_swish.has_function());
    assert!(!hard_swish.has_context_dependent_function());
    assert_eq!(
        hard_swish.function_opset_versions().collect::<Vec<_>>(),
        [14]
    );
    let body = hard_swish
        .function_body(14)
        .expect("HardSwish-14 has a body");
    assert_eq!(body.name.as_deref(), Some("HardSwish"));
    assert_eq!(op_types(&body), ["HardSigmoid", "Mul"]);
    assert_eq!(opset_of(&body, ""), Some(14));
    // The highest function version not above the request: 14 serves 20 too, nothing serves 13.
    assert_eq!(hard_swish.function_body(20), Some(body));
    assert_eq!(hard_swish.function_body(13), None);
}

#[test]
fn function_body_picks_the_highest_function_version_not_above() {
    // onnx: Softplus-1 has function_opset_versions [18]; get_function_with_opset_version(13)
    // is empty, (20) gives the opset-18 body. MeanVarianceNormalization-13 has [13, 18].
    let softplus = schema("", "Softplus", 1);
    assert_eq!(softplus.function_body(17), None);
    let at18 = softplus.function_body(18).expect("body at 18");
    assert_eq!(opset_of(&at18, ""), Some(18));
    assert_eq!(softplus.function_body(20), Some(at18));
    let mvn = schema("", "MeanVarianceNormalization", 13);
    assert_eq!(mvn.function_opset_versions().collect::<Vec<_>>(), [13, 18]);
    let (b13, b18) = (mvn.function_body(17), mvn.function_body(18));
    assert_eq!(b13.as_ref().and_then(|b| opset_of(b, "")), Some(13));
    assert_eq!(b18.as_ref().and_then(|b| opset_of(b, "")), Some(18));
    assert!(schema("", "Add", 14).function_body(28).is_none());
}

#[test]
fn function_flags_agree_with_the_stored_bodies() {
    // From onnx 1.23.2: 42 schema versions have a context-independent function, 34 a
    // context-dependent one.
    let reg = registry();
    let mut with_function = 0;
    let mut with_context_dependent = 0;
    for s in reg.iter() {
        let versions: Vec<i64> = s.function_opset_versions().collect();
        assert_eq!(s.has_function(), !versions.is_empty(), "{}", s.id());
        for v in versions {
            let body = s.function_body(v).expect("a listed version has a body");
            assert!(!body.node.is_empty(), "{} body at {v} has nodes", s.id());
            assert_eq!(body.name.as_deref(), Some(s.name.as_str()));
        }
        let cd: Vec<i64> = s.context_dependent_function_opset_versions().collect();
        assert_eq!(
            s.has_context_dependent_function(),
            !cd.is_empty(),
            "{}",
            s.id()
        );
        with_function += usize::from(s.has_function());
        with_context_dependent += usize::from(s.has_context_dependent_function());
    }
    assert_eq!((with_function, with_context_dependent), (42, 34));
}

#[test]
fn context_instances_are_consistent_with_their_schema() {
    // The generator could not instantiate 2 of the contexts (Attention-25 with every optional
    // input, SequenceMap-17 without a body graph); every other one is present.
    let mut instances = 0;
    for s in registry().iter() {
        for v in s.context_dependent_function_opset_versions() {
            for inst in s.context_dependent_function_instances(v) {
                instances += 1;
                let what = format!("{} opset {v} {}", s.id(), inst.label);
                assert_eq!(
                    inst.node.op_type.as_deref(),
                    Some(s.name.as_str()),
                    "{what}"
                );
                assert_eq!(inst.node.input.len(), inst.input_types.len(), "{what}");
                assert!(!inst.body.node.is_empty(), "{what}");
                assert_eq!(opset_of(&inst.body, &s.domain), Some(v), "{what}");
                for (name, ty) in inst.node.input.iter().zip(&inst.input_types) {
                    assert_eq!(name.is_empty(), ty.is_none(), "{what}: input {name}");
                    if let Some(ty) = ty {
                        let ty = type_str_of(ty).expect("instance input types render");
                        assert!(
                            s.inputs.iter().any(|p| {
                                s.allowed_types(&p.type_str)
                                    .is_some_and(|a| a.contains(&ty))
                            }),
                            "{what}: {ty} is allowed for some input"
                        );
                    }
                }
            }
        }
    }
    assert_eq!(instances, 50);
}

// The op-type tables below were computed with onnx 1.23.2: the generator's bodies decoded with
// onnx.FunctionProto and listed as [n.op_type for n in body.node].

#[test]
fn layer_normalization_bodies_decode() {
    let ln = schema("", "LayerNormalization", 17);
    assert!(ln.has_context_dependent_function());
    assert!(!ln.has_function());
    assert_eq!(ln.function_body(17), None);
    assert_eq!(
        ln.context_dependent_function_opset_versions()
            .collect::<Vec<_>>(),
        [17, 18]
    );
    let common = [
        "Constant",
        "Cast",
        "Shape",
        "Size",
        "Constant",
        "Constant",
        "Slice",
        "Neg",
        "ConstantOfShape",
        "Concat",
        "Flatten",
        "Cast",
    ];
    let tail_with_bias = [
        "Cast",
        "Flatten",
        "Mul",
        "Flatten",
        "Add",
        "Reshape",
        "Reciprocal",
        "Reshape",
        "Reshape",
    ];
    let stats17 = [
        "ReduceMean",
        "Mul",
        "ReduceMean",
        "Mul",
        "Sub",
        "Add",
        "Sqrt",
        "Sub",
        "Div",
    ];
    let all17 = ln
        .context_dependent_function_instance(17, "all_inputs")
        .expect("LayerNormalization-17 all_inputs");
    let expected17: Vec<&str> = [&common[..], &stats17, &tail_with_bias].concat();
    assert_eq!(op_types(&all17.body), expected17);
    assert_eq!(all17.node.input, ["X", "Scale", "B"]);
    // Without the optional bias, the Flatten+Add pair becomes an Identity.
    let req17 = ln
        .context_dependent_function_instance(17, "required_inputs")
        .expect("LayerNormalization-17 required_inputs");
    assert_eq!(req17.node.input, ["X", "Scale"]);
    let tail_without_bias = [
        "Cast",
        "Flatten",
        "Mul",
        "Identity",
        "Reshape",
        "Reciprocal",
        "Reshape",
        "Reshape",
    ];
    let expected_req: Vec<&str> = [&common[..], &stats17, &tail_without_bias].concat();
    assert_eq!(op_types(&req17.body), expected_req);
    // Opset 18 takes the ReduceMean axes as an input (one more Constant); 20 still binds 18.
    let all18 = ln
        .context_dependent_function_instance(20, "all_inputs")
        .expect("LayerNormalization-17 function at opset 18");
    let expected18: Vec<&str> = [&common[..], &["Constant"], &stats17, &tail_with_bias].concat();
    assert_eq!(op_types(&all18.body), expected18);
    assert!(ln.context_dependent_function_instances(16).is_empty());
}

#[test]
fn gelu_bodies_decode_for_both_approximations() {
    let gelu = schema("", "Gelu", 20);
    let exact = gelu
        .context_dependent_function_instance(20, "all_inputs")
        .expect("Gelu exact");
    assert_eq!(
        op_types(&exact.body),
        [
            "Constant", "CastLike", "Constant", "CastLike", "Constant", "CastLike", "Sqrt", "Div",
            "Erf", "Sum", "Mul", "Mul",
        ]
    );
    let tanh = gelu
        .context_dependent_function_instance(20, "approximate=tanh")
        .expect("Gelu tanh");
    assert_eq!(
        op_types(&tanh.body),
        [
            "Constant", "CastLike", "Constant", "CastLike", "Constant", "CastLike", "Constant",
            "CastLike", "Sqrt", "Constant", "CastLike", "Pow", "Mul", "Sum", "Mul", "Tanh", "Sum",
            "Mul", "Mul",
        ]
    );
    let approximate = tanh
        .node
        .attribute
        .iter()
        .find(|a| a.name.as_deref() == Some("approximate"));
    assert_eq!(approximate.and_then(|a| a.s.as_deref()), Some(&b"tanh"[..]));
    let input_type = tanh.input_types.first().and_then(|t| t.as_ref());
    assert_eq!(
        input_type.and_then(type_str_of).as_deref(),
        Some("tensor(float)")
    );
    // Gelu has no optional input, so no "required_inputs" instance.
    let labels: Vec<&str> = gelu
        .context_dependent_function_instances(28)
        .iter()
        .map(|i| i.label.as_str())
        .collect();
    assert_eq!(labels, ["all_inputs", "approximate=tanh"]);
}

#[test]
fn rms_normalization_body_decodes() {
    let rms = schema("", "RMSNormalization", 23);
    let all = rms
        .context_dependent_function_instance(23, "all_inputs")
        .expect("RMSNormalization-23");
    assert_eq!(
        op_types(&all.body),
        [
            "Constant",
            "Cast",
            "Shape",
            "Size",
            "Constant",
            "Add",
            "Constant",
            "Range",
            "Cast",
            "Mul",
            "ReduceMean",
            "Add",
            "Sqrt",
            "Div",
            "Cast",
            "Mul",
        ]
    );
    assert_eq!(
        all.body
            .output
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["Y"]
    );
}
