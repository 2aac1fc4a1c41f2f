//! Attributes, their defaults, formal parameters and type constraints.

use onnx_proto::attribute_proto::AttributeType;
use onnx_schema::{registry, ParamOption};

use crate::schema;

#[test]
fn conv_auto_pad_defaults_to_notset() {
    let conv = schema("", "Conv", 11);
    let auto_pad = conv.attribute("auto_pad").expect("Conv has auto_pad");
    assert_eq!(auto_pad.ty, AttributeType::String);
    assert!(!auto_pad.required);
    let default = auto_pad.default.as_ref().expect("auto_pad has a default");
    assert_eq!(default.s.as_deref(), Some(&b"NOTSET"[..]));
    assert_eq!(default.name.as_deref(), Some("auto_pad"));
    let group = conv.attribute("group").and_then(|a| a.default.as_ref());
    assert_eq!(group.and_then(|a| a.i), Some(1));
    // Conv's `pads` has no default; unknown names give None.
    assert!(conv.attribute("pads").expect("pads").default.is_none());
    assert!(conv.attribute("no_such_attribute").is_none());
}

#[test]
fn leaky_relu_alpha_defaults_to_0_01() {
    for v in [1, 6, 16] {
        let leaky = schema("", "LeakyRelu", v);
        let alpha = leaky.attribute("alpha").expect("alpha");
        assert_eq!(alpha.ty, AttributeType::Float);
        assert_eq!(
            alpha.default.as_ref().and_then(|a| a.f),
            Some(0.01_f32),
            "LeakyRelu-{v}"
        );
    }
}

#[test]
fn required_graph_attributes_have_no_default() {
    let if13 = schema("", "If", 13);
    let then_branch = if13.attribute("then_branch").expect("then_branch");
    assert_eq!(then_branch.ty, AttributeType::Graph);
    assert!(then_branch.required);
    assert!(then_branch.default.is_none());
}

#[test]
fn every_default_is_well_formed() {
    // From onnx 1.23.2: 637 attributes carry a default (389 INT, 124 STRING, 118 FLOAT,
    // 4 STRINGS, 2 INTS); onnxruntime 1.31.1's own schemas add 248 (231 in com.microsoft, in
    // the registry, 17 in onnx's domains, apart).
    let mut with_default = 0;
    for s in registry()
        .iter()
        .chain(onnx_schema::onnxruntime_extensions().iter())
    {
        assert!(
            s.attributes.windows(2).all(|w| w[0].name < w[1].name),
            "{}: attributes sorted by name",
            s.id()
        );
        for a in &s.attributes {
            let Some(default) = &a.default else { continue };
            with_default += 1;
            assert!(
                !a.required,
                "{}: required attribute {} has a default",
                s.id(),
                a.name
            );
            assert_eq!(default.name.as_deref(), Some(a.name.as_str()), "{}", s.id());
            assert_eq!(default.r#type, Some(a.ty as i32), "{}.{}", s.id(), a.name);
        }
    }
    assert_eq!(with_default, 637 + 248);
}

#[test]
fn formal_parameters_match_onnx() {
    // onnx: Conv-11 inputs X (Single), W (Single), B (Optional); Concat-13 input is Variadic
    // with min_arity 1 and homogeneous; max_input of a variadic op is 2**31 - 1.
    let conv = schema("", "Conv", 11);
    let options: Vec<(&str, ParamOption)> = conv
        .inputs
        .iter()
        .map(|p| (p.name.as_str(), p.option))
        .collect();
    assert_eq!(
        options,
        [
            ("X", ParamOption::Single),
            ("W", ParamOption::Single),
            ("B", ParamOption::Optional)
        ]
    );
    assert_eq!((conv.min_input, conv.max_input), (2, 3));
    assert_eq!((conv.min_output, conv.max_output), (1, 1));
    let concat = schema("", "Concat", 13);
    let inputs = concat.input("inputs").expect("Concat's input");
    assert_eq!(inputs.option, ParamOption::Variadic);
    assert_eq!(inputs.min_arity, 1);
    assert!(inputs.is_homogeneous);
    assert_eq!(concat.max_input, i32::MAX as usize);
    assert!(concat.output("concat_result").is_some());
}

#[test]
fn add_allows_float16_and_bfloat16() {
    // onnx: get_schema("Add", 14).type_constraints[0].allowed_type_strs.
    let add = schema("", "Add", 14);
    let allowed = add.allowed_types("T").expect("Add has T");
    let expected = [
        "tensor(uint8)",
        "tensor(uint16)",
        "tensor(uint32)",
        "tensor(uint64)",
        "tensor(int8)",
        "tensor(int16)",
        "tensor(int32)",
        "tensor(int64)",
        "tensor(float16)",
        "tensor(float)",
        "tensor(double)",
        "tensor(bfloat16)",
    ];
    assert_eq!(allowed, expected);
    // onnx: Add-7 allows float16 but not bfloat16 (added in Add-13).
    let add7 = schema("", "Add", 7);
    let allowed7 = add7.allowed_types("T").expect("Add-7 has T");
    assert!(allowed7.iter().any(|t| t == "tensor(float16)"));
    assert!(!allowed7.iter().any(|t| t == "tensor(bfloat16)"));
}

#[test]
fn literal_parameter_types_resolve_to_themselves() {
    let reshape = schema("", "Reshape", 14);
    let shape = reshape.input("shape").expect("Reshape's shape input");
    assert_eq!(shape.type_str, "tensor(int64)");
    assert_eq!(
        reshape.allowed_types(&shape.type_str),
        Some(&["tensor(int64)".to_string()][..])
    );
    assert_eq!(reshape.allowed_types("tensor(float)"), None);
    assert_eq!(reshape.allowed_types("NoSuchParam"), None);
}

#[test]
fn every_parameter_type_resolves() {
    for s in registry().iter() {
        for p in s.inputs.iter().chain(&s.outputs) {
            let allowed = s.allowed_types(&p.type_str);
            assert!(
                allowed.is_some_and(|a| !a.is_empty()),
                "{}: {} has type {} with no allowed types",
                s.id(),
                p.name,
                p.type_str
            );
        }
    }
}
