//! The schema-driven checks: every shared model gets the verdict `onnx.checker` gives it
//! (`tests/onnx_checker_verdicts.txt`, written by `tests/onnx_checker_verdicts.py`), and each
//! schema rule rejects a model built here with exactly the expected message.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use onnx_ir::{
    check_model, check_model_report, check_model_with, CheckError, CheckOptions, CheckReport,
    Model, Port, SchemaProblem,
};
use onnx_proto::{
    attribute_proto::AttributeType, tensor_proto::DataType, AttributeProto, FunctionProto,
    ModelProto, NodeProto, ValueInfoProto,
};

/// onnx.checker's full-check verdict per model path (relative to the shared dir).
fn onnx_verdicts() -> BTreeMap<String, bool> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/onnx_checker_verdicts.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut verdicts = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let fields: Vec<&str> = line.split(' ').collect();
        let [model, _basic, full] = fields[..] else {
            panic!("malformed verdict line: {line}");
        };
        assert!(
            full == "ok" || full == "rejected",
            "malformed verdict: {line}"
        );
        verdicts.insert(model.to_string(), full == "ok");
    }
    verdicts
}

#[test]
fn shared_models_get_onnx_checkers_verdict_and_are_sorted() {
    let root = onnx_testdata::require_shared!();
    let verdicts = onnx_verdicts();
    let models = shared_models(&root);
    assert_eq!(
        models.len(),
        verdicts.len(),
        "the verdict list is stale: regenerate it with tests/onnx_checker_verdicts.py"
    );
    let mut disagreements = Vec::new();
    let mut rejected = Vec::new();
    for path in models {
        let relative = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let Some(&onnx_accepts) = verdicts.get(&relative) else {
            panic!("{relative} has no onnx.checker verdict: regenerate the verdict list");
        };
        let loaded = onnx_proto::load_model(&path).unwrap_or_else(|e| panic!("{e}"));
        let mut model = Model::from_proto(loaded.model).unwrap_or_else(|e| panic!("{e}"));
        let result = check_model(&model);
        if result.is_ok() != onnx_accepts {
            let ours = match &result {
                Ok(()) => "accepted".to_string(),
                Err(errors) => format!("rejected: {}", errors[0]),
            };
            disagreements.push(format!(
                "{relative}: onnx.checker {}, onnx-ir {ours}",
                if onnx_accepts { "accepts" } else { "rejects" }
            ));
        }
        if let Err(errors) = result {
            rejected.push(format!("{relative}: {}", errors[0]));
        }
        match model.graph.sort_topologically() {
            Ok(false) => {}
            Ok(true) => disagreements.push(format!("{relative}: was not in topological order")),
            Err(e) => disagreements.push(format!("{relative}: {e}")),
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements with onnx.checker: {:#?}",
        disagreements.len(),
        &disagreements[..disagreements.len().min(40)]
    );
    assert_eq!(
        rejected,
        ["onnx-backend/node/test_mvn/model.onnx: node 0 (MeanVarianceNormalization): attribute 'axes' is not set and the function body of MeanVarianceNormalization-13 (opset 18) gives no default for it, so body node 2 (Constant) has no value; onnx.checker's full check expands this body: set 'axes' explicitly"]
    );
}

/// The checker's messages for a model (empty when it passes).
fn messages(proto: ModelProto) -> Vec<String> {
    let model = Model::from_proto(proto).expect("conversion is total");
    match check_model(&model) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

/// Asserts the exact list of messages.
fn check(proto: ModelProto, expected: &[&str]) {
    assert_eq!(messages(proto), expected);
}

/// A model with one node between float[2] inputs `x...` and outputs `y...`.
fn one_node(n: NodeProto, inputs: &[&str], outputs: &[&str]) -> ModelProto {
    model(graph("main", inputs, outputs, vec![n]))
}

fn typed(name: &str, elem: DataType) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(tensor_type(elem, &[2])),
        ..Default::default()
    }
}

fn with_opset(mut m: ModelProto, domain: &str, version: i64) -> ModelProto {
    m.opset_import = vec![opset(domain, version)];
    m
}

#[test]
fn the_schema_problem_is_structured_and_names_node_op_and_value() {
    let m = one_node(
        node("Mul", "mul_1", &["x", "x", "x"], &["y"]),
        &["x"],
        &["y"],
    );
    let model = Model::from_proto(m).expect("converts");
    let errors = check_model(&model).expect_err("three inputs");
    assert_eq!(errors.len(), 1);
    let CheckError::Schema { node, problem } = &errors[0] else {
        panic!("not a schema error: {:?}", errors[0]);
    };
    assert_eq!((node.index, node.op_type.as_str()), (0, "Mul"));
    assert_eq!(
        problem,
        &SchemaProblem::TooMany {
            port: Port::Input,
            callee: "Mul-14".into(),
            max: 2,
            given: 3,
        }
    );
    assert_eq!(
        errors[0].to_string(),
        "node 0 'mul_1' (Mul): input 2 given but Mul-14 takes at most 2 inputs"
    );
}

#[test]
fn schema_checks_can_be_switched_off() {
    let m = one_node(node("Frobnicate", "f", &["x"], &["y"]), &["x"], &["y"]);
    let model = Model::from_proto(m).expect("converts");
    assert!(check_model(&model).is_err());
    let structural = CheckOptions::default().with_schema_checks(false);
    assert_eq!(check_model_with(&model, &structural), Ok(()));
}

#[test]
fn unknown_domains_pass_and_onnx_domains_do_not() {
    let mut custom = node("Frobnicate", "f", &["x"], &["y"]);
    custom.domain = Some("com.example".into());
    let mut m = one_node(custom, &["x"], &["y"]);
    m.opset_import.push(opset("com.example", 1));
    check(m, &[]);

    for (domain, label) in [
        ("ai.onnx.ml", "ai.onnx.ml"),
        ("ai.onnx.training", "ai.onnx.training"),
        ("ai.onnx.preview.training", "ai.onnx.preview.training"),
        ("ai.onnx", "ai.onnx"),
    ] {
        let mut n = node("Frobnicate", "f", &["x"], &["y"]);
        n.domain = Some(domain.into());
        let m = with_opset(one_node(n, &["x"], &["y"]), domain, 1);
        check(
            m,
            &[&format!(
                "node 0 'f' (Frobnicate): Frobnicate is not an operator of domain '{label}' (imported at opset 1)"
            )],
        );
    }
}

#[test]
fn ops_bind_to_the_schema_of_the_imported_opset() {
    // Opset 12 binds Relu-6 (float only), opset 14 Relu-14 (which allows int32).
    let relu = || node("Relu", "r", &["x"], &["y"]);
    let mut g = graph("main", &[], &[], vec![relu()]);
    g.input = vec![typed("x", DataType::Int32)];
    g.output = vec![typed("y", DataType::Int32)];
    check(with_opset(model(g.clone()), "", 14), &[]);
    check(
        with_opset(model(g), "", 12),
        &[
            "node 0 'r' (Relu): input 0 'x' has type tensor(int32), which Relu-6 does not allow for X (T)",
            "node 0 'r' (Relu): output 0 'y' has type tensor(int32), which Relu-6 does not allow for Y (T)",
        ],
    );
    // An opset newer than onnx knows binds the newest schema.
    check(with_opset(one_node(relu(), &["x"], &["y"]), "", 40), &[]);
    // "ai.onnx" is another spelling of the ONNX domain.
    let mut spelled = relu();
    spelled.domain = Some("ai.onnx".into());
    check(one_node(spelled, &["x"], &["y"]), &[]);
}

#[test]
fn arity_follows_the_formal_parameters() {
    // Optional inputs may be absent ("" or trailing), variadic ones repeat.
    let clip = node("Clip", "c", &["x", "", "hi"], &["y"]);
    let mut m = one_node(clip, &["x", "hi"], &["y"]);
    m.graph.as_mut().expect("graph").input[1] = ValueInfoProto {
        name: Some("hi".into()),
        r#type: Some(tensor_type(DataType::Float, &[])),
        ..Default::default()
    };
    check(m, &[]);
    let concat_inputs = ["a", "b", "c", "d", "e"];
    let mut concat = node("Concat", "cat", &concat_inputs, &["y"]);
    concat.attribute = vec![int_attr("axis", 0)];
    check(one_node(concat, &concat_inputs, &["y"]), &[]);
    // BatchNormalization-9 takes 1 or 5 outputs.
    let bn_inputs = ["x", "s", "b", "m", "v"];
    let five = ["y", "m2", "v2", "sm", "sv"];
    let bn = node("BatchNormalization", "bn", &bn_inputs, &five);
    check(with_opset(one_node(bn, &bn_inputs, &five), "", 9), &[]);
    let four = ["y", "m2", "v2", "sm"];
    let bn = node("BatchNormalization", "bn", &bn_inputs, &four);
    check(
        with_opset(one_node(bn, &bn_inputs, &four), "", 9),
        &["node 0 'bn' (BatchNormalization): 4 outputs given but BatchNormalization-9 takes 1 or 5 outputs"],
    );
    // A required output given as "".
    let dropout = node("Dropout", "d", &["x"], &["", "mask"]);
    let mut m = one_node(dropout, &["x"], &[]);
    m.graph.as_mut().expect("graph").output = vec![typed("mask", DataType::Bool)];
    check(
        m,
        &["node 0 'd' (Dropout): output 0 (output) of Dropout-13 is required but given as \"\""],
    );
}

fn tensor_attr_without_value(name: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Tensor as i32),
        ..Default::default()
    }
}

#[test]
fn attribute_rules_and_their_exceptions() {
    // A TENSOR attribute of the right type without its `t`.
    let mut constant = node("Constant", "c", &[], &["y"]);
    constant.attribute = vec![tensor_attr_without_value("value")];
    check(
        one_node(constant, &[], &["y"]),
        &["node 0 'c' (Constant): attribute 'value' has type TENSOR but no value in field 't'"],
    );
    // Internal `__` attributes, LayerNormalization-17's unchecked attributes, and onnx's
    // experimental ops are not checked.
    let mut relu = node("Relu", "r", &["x"], &["y"]);
    relu.attribute = vec![int_attr("__debug", 1)];
    check(one_node(relu, &["x"], &["y"]), &[]);
    let mut ln = node("LayerNormalization", "ln", &["x", "s"], &["y"]);
    ln.attribute = vec![int_attr("extra", 1)];
    check(one_node(ln, &["x", "s"], &["y"]), &[]);
    let mut scale = node("Scale", "s", &["x"], &["y"]);
    scale.attribute = vec![int_attr("anything", 1)];
    check(one_node(scale, &["x"], &["y"]), &[]);
    // IR 1 has no attribute type field to fall back on: the schema reports it.
    let mut leaky = node("LeakyRelu", "l", &["x"], &["y"]);
    leaky.attribute = vec![AttributeProto {
        name: Some("alpha".into()),
        f: Some(0.5),
        ..Default::default()
    }];
    let mut m = one_node(leaky, &["x"], &["y"]);
    m.ir_version = Some(1);
    m.opset_import.clear();
    check(
        m,
        &["node 0 'l' (LeakyRelu): attribute 'alpha' has type UNDEFINED but LeakyRelu-1 declares it FLOAT"],
    );
}

#[test]
fn types_come_from_declarations_initializers_and_enclosing_graphs() {
    // An int64 initializer without a declaration added to a float input.
    let mut g = graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Add", "a", &["x", "k"], &["y"])],
    );
    g.initializer = vec![onnx_proto::TensorProto {
        name: Some("k".into()),
        dims: vec![2],
        data_type: Some(DataType::Int64 as i32),
        int64_data: vec![1, 2],
        ..Default::default()
    }];
    check(
        model(g),
        &["node 0 'a' (Add): input 1 'k' has type tensor(int64) but T of Add-14 is already tensor(float) (from input 0)"],
    );
    // A value_info entry declares a node output's type.
    let mut g = graph(
        "main",
        &["x"],
        &["y"],
        vec![
            node("Relu", "r", &["x"], &["t"]),
            node("Identity", "i", &["t"], &["y"]),
        ],
    );
    g.value_info = vec![typed("t", DataType::Int64)];
    check(
        model(g),
        &[
            "node 0 'r' (Relu): output 0 't' has type tensor(int64) but T of Relu-14 is already tensor(float) (from input 0)",
            "node 1 'i' (Identity): output 0 'y' has type tensor(float) but V of Identity-16 is already tensor(int64) (from input 0)",
        ],
    );
    // A subgraph reads `flag` (bool) from the main graph and feeds it to Relu.
    let then_g = graph(
        "then",
        &[],
        &["t"],
        vec![node("Relu", "r", &["flag"], &["t"])],
    );
    let else_g = graph(
        "else",
        &[],
        &["e"],
        vec![node("Identity", "i", &["x"], &["e"])],
    );
    let mut if_node = node("If", "if", &["flag"], &["y"]);
    if_node.attribute = vec![
        graph_attr("then_branch", then_g),
        graph_attr("else_branch", else_g),
    ];
    let mut g = graph("main", &["x"], &["y"], vec![if_node]);
    g.input.push(ValueInfoProto {
        name: Some("flag".into()),
        r#type: Some(tensor_type(DataType::Bool, &[])),
        ..Default::default()
    });
    check(
        model(g),
        &["node 0 'if' (If) attribute 'then_branch': node 0 'r' (Relu): input 0 'flag' has type tensor(bool), which Relu-14 does not allow for X (T)"],
    );
}

fn local_function(name: &str, domain: &str) -> FunctionProto {
    FunctionProto {
        name: Some(name.into()),
        domain: Some(domain.into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        attribute: vec!["gain".into()],
        node: vec![node("Relu", "body", &["a"], &["b"])],
        opset_import: vec![opset("", 17)],
        ..Default::default()
    }
}

#[test]
fn calls_of_model_local_functions_use_the_function_signature() {
    let mut call = node("Act", "call", &["x"], &["y"]);
    call.domain = Some("custom".into());
    call.attribute = vec![int_attr("gain", 2)];
    let mut m = one_node(call.clone(), &["x"], &["y"]);
    m.opset_import.push(opset("custom", 1));
    m.functions = vec![local_function("Act", "custom")];
    check(m.clone(), &[]);
    call.input.push("x".into());
    call.output.push("z".into());
    call.attribute.push(int_attr("bias", 0));
    m.graph.as_mut().expect("graph").node = vec![call];
    check(
        m,
        &[
            "node 0 'call' (Act): input 1 given but function 'custom:Act' takes at most 1 input",
            "node 0 'call' (Act): output 1 given but function 'custom:Act' takes at most 1 output",
            "node 0 'call' (Act): attribute 'bias' is not an attribute of function 'custom:Act'",
        ],
    );
    // A function in the ONNX domain with an op's name is checked as the function, not the op.
    let mut shadow = node("Relu", "r", &["x"], &["y"]);
    shadow.attribute = vec![int_attr("gain", 1)];
    let mut m = one_node(shadow, &["x"], &["y"]);
    let mut function = local_function("Relu", "");
    function.node = vec![node("Identity", "body", &["a"], &["b"])];
    m.functions = vec![function];
    check(m, &[]);
}

/// An input the model declares no type for is checked with the type inference gives it (as
/// onnx's full check, which infers first), through calls of model-local functions too, and past
/// a node inference cannot get through.
#[test]
fn undeclared_inputs_are_checked_with_their_inferred_types() {
    let sin_of = |value: &str, ty: &str| {
        format!(
            "node 1 's' (Sin): input 0 '{value}' has type {ty} (inferred: the model declares none), which Sin-7 does not allow for input (T)"
        )
    };
    // A sequence into Sin, which takes tensors; a MatMul inference rejects (2 by 3) before it.
    let mut w = vi("w", &[3]);
    w.name = Some("w".into());
    let mut g = graph(
        "main",
        &["x"],
        &["y"],
        vec![
            node("SequenceConstruct", "seq", &["x"], &["t"]),
            node("Sin", "s", &["t"], &["y"]),
            node("MatMul", "mm", &["x", "w"], &["z"]),
        ],
    );
    g.node.swap(0, 2);
    g.node.swap(1, 2);
    g.input.push(w);
    assert_eq!(
        g.node
            .iter()
            .map(|n| n.name.as_deref().unwrap())
            .collect::<Vec<_>>(),
        ["mm", "seq", "s"]
    );
    let sin_index = |msg: String| msg.replace("node 1 's'", "node 2 's'");
    check(model(g), &[&sin_index(sin_of("t", "seq(tensor(float))"))]);

    // The sequence made by a model-local function.
    let make_seq = FunctionProto {
        name: Some("MakeSeq".into()),
        domain: Some("custom".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        node: vec![node("SequenceConstruct", "body", &["a"], &["b"])],
        opset_import: vec![opset("", 17)],
        ..Default::default()
    };
    let mut call = node("MakeSeq", "call", &["x"], &["t"]);
    call.domain = Some("custom".into());
    let mut m = model(graph(
        "main",
        &["x"],
        &["y"],
        vec![call, node("Sin", "s", &["t"], &["y"])],
    ));
    m.opset_import.push(opset("custom", 1));
    m.functions = vec![make_seq];
    check(m, &[&sin_of("t", "seq(tensor(float))")]);

    // A function's attribute reference takes the call's value, else the function's default.
    let mut cast = node("Cast", "body", &["a"], &["b"]);
    cast.attribute = vec![AttributeProto {
        name: Some("to".into()),
        r#type: Some(AttributeType::Int as i32),
        ref_attr_name: Some("to".into()),
        ..Default::default()
    }];
    let cast_to = FunctionProto {
        name: Some("CastTo".into()),
        domain: Some("custom".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        attribute_proto: vec![int_attr("to", DataType::Float as i64)],
        node: vec![cast],
        opset_import: vec![opset("", 17)],
        ..Default::default()
    };
    let with_call = |to: Option<DataType>| {
        let mut call = node("CastTo", "call", &["x"], &["t"]);
        call.domain = Some("custom".into());
        call.attribute = to.map(|t| int_attr("to", t as i64)).into_iter().collect();
        let mut m = model(graph(
            "main",
            &["x"],
            &["y"],
            vec![call, node("Sin", "s", &["t"], &["y"])],
        ));
        m.opset_import.push(opset("custom", 1));
        m.functions = vec![cast_to.clone()];
        m
    };
    check(
        with_call(Some(DataType::Int64)),
        &[&sin_of("t", "tensor(int64)")],
    );
    check(with_call(None), &[]);
}

/// The nodes of a model-local function's body are checked with the types each call gives them
/// (its inputs typed as the call's, inferred through the body, attribute references resolved
/// from the call), through nested calls, as onnx's full check infers into each call: a
/// sequence passed through one function to another whose body feeds it to Sin (fuzz seed
/// 0x1fe68f0af33cb9f7, where it fed Scan-11).
#[test]
fn function_bodies_are_checked_with_the_types_each_call_gives_them() {
    let function = |name: &str, attributes: &[&str], body: Vec<NodeProto>| FunctionProto {
        name: Some(name.into()),
        domain: Some("custom".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        attribute: attributes.iter().map(|a| a.to_string()).collect(),
        node: body,
        opset_import: vec![opset("", 17), opset("custom", 1)],
        ..Default::default()
    };
    let call = |op: &str, name: &str, input: &str, output: &str| {
        let mut n = node(op, name, &[input], &[output]);
        n.domain = Some("custom".into());
        n
    };
    let to_ref = AttributeProto {
        name: Some("to".into()),
        r#type: Some(AttributeType::Int as i32),
        ref_attr_name: Some("to".into()),
        ..Default::default()
    };
    // Outer passes its input (and its attribute `to`) to Inner, which casts it to `to`
    // (float by default) and takes its sine.
    let mut mid = call("Inner", "mid", "a", "b");
    mid.attribute.push(to_ref.clone());
    let outer = function("Outer", &["to"], vec![mid]);
    let mut cast = node("Cast", "cast", &["a"], &["c"]);
    cast.attribute.push(to_ref);
    let mut inner = function(
        "Inner",
        &[],
        vec![cast, node("Sin", "sine", &["c"], &["b"])],
    );
    inner.attribute_proto = vec![int_attr("to", DataType::Float as i64)];
    let with = |sequence: bool, to: Option<DataType>| {
        let mut nodes = Vec::new();
        let mut input = "x";
        if sequence {
            nodes.push(node("SequenceConstruct", "seq", &["x"], &["t"]));
            input = "t";
        }
        let mut c = call("Outer", "call", input, "y");
        c.attribute = to.map(|t| int_attr("to", t as i64)).into_iter().collect();
        nodes.push(c);
        let mut m = model(graph("main", &["x"], &["y"], nodes));
        m.opset_import.push(opset("custom", 1));
        m.functions = vec![outer.clone(), inner.clone()];
        m
    };
    // Tensors in, cast to float: valid.
    check(with(false, None), &[]);
    check(with(false, Some(DataType::Double)), &[]);
    // The call's attribute reaches Inner's Cast through Outer: Sin takes no int64.
    check(
        with(false, Some(DataType::Int64)),
        &["node 0 'call' (Outer) calls custom:Outer, whose node 0 'mid' (Inner) calls custom:Inner, whose node 1 'sine' (Sin): input 0 'c' has type tensor(int64) (inferred: the model declares none), which Sin-7 does not allow for input (T)"],
    );
    // A sequence reaches Inner's Cast, which takes tensors only.
    check(
        with(true, None),
        &["node 1 'call' (Outer) calls custom:Outer, whose node 0 'mid' (Inner) calls custom:Inner, whose node 0 'cast' (Cast): input 0 'a' has type seq(tensor(float)) (inferred: the model declares none), which Cast-13 does not allow for input (T1)"],
    );
    // Each function's own check, on declared types only, still passes alone: a function that
    // no call reaches with a bad type is not reported.
    let mut unused = with(false, None);
    unused.graph.as_mut().unwrap().node.clear();
    unused
        .graph
        .as_mut()
        .unwrap()
        .node
        .push(node("Identity", "id", &["x"], &["y"]));
    check(unused, &[]);
}

/// The checker's report for a model, as messages: (errors, warnings).
fn report(proto: ModelProto) -> (Vec<String>, Vec<String>) {
    let model = Model::from_proto(proto).expect("conversion is total");
    let CheckReport { errors, warnings } = check_model_report(&model, &CheckOptions::default());
    assert!(warnings.iter().all(CheckError::is_warning));
    assert!(!errors.iter().any(CheckError::is_warning));
    let text = |list: Vec<CheckError>| list.iter().map(ToString::to_string).collect();
    (text(errors), text(warnings))
}

fn ms(mut n: NodeProto) -> NodeProto {
    n.domain = Some("com.microsoft".into());
    n
}

fn float_attr(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(value),
        ..Default::default()
    }
}

#[test]
fn com_microsoft_ops_are_checked_against_onnxruntimes_schemas() {
    // A BERT-like chain of onnxruntime contrib ops passes, without warnings.
    let mut skip = ms(node(
        "SkipLayerNormalization",
        "sln",
        &["x", "x", "x", "x"],
        &["s"],
    ));
    skip.attribute.push(float_attr("epsilon", 1e-5));
    let mut attention = ms(node("Attention", "att", &["s", "x", "x"], &["a"]));
    attention.attribute.push(int_attr("num_heads", 2));
    let gelu = ms(node("FastGelu", "gelu", &["a"], &["y"]));
    let mut m = model(graph("main", &["x"], &["y"], vec![skip, attention, gelu]));
    m.opset_import.push(opset("com.microsoft", 1));
    assert_eq!(report(m.clone()), (vec![], vec![]));
    check(m, &[]);

    // The schema's rules apply: Attention requires num_heads and takes at most 7 inputs.
    let mut m = one_node(
        ms(node(
            "Attention",
            "att",
            &["x", "x", "x", "", "", "", "", ""],
            &["y"],
        )),
        &["x"],
        &["y"],
    );
    m.opset_import.push(opset("com.microsoft", 1));
    check(
        m,
        &[
            "node 0 'att' (Attention): input 7 given but com.microsoft:Attention-1 takes at most 7 inputs",
            "node 0 'att' (Attention): com.microsoft:Attention-1 requires attribute 'num_heads'",
        ],
    );

    // An op onnxruntime 1.31.1 does not register in com.microsoft passes unchecked, as a custom
    // domain's ops do.
    let mut m = one_node(
        ms(node("FutureContribOp", "f", &["x"], &["y"])),
        &["x"],
        &["y"],
    );
    m.opset_import.push(opset("com.microsoft", 1));
    assert_eq!(report(m), (vec![], vec![]));
}

#[test]
fn onnxruntimes_layer_normalization_below_17_passes_with_a_warning() {
    for (op, inputs) in [
        ("LayerNormalization", &["x", "x", "x"][..]),
        ("SimplifiedLayerNormalization", &["x", "x"][..]),
    ] {
        let m = with_opset(
            one_node(node(op, "ln", inputs, &["y"]), &["x"], &["y"]),
            "",
            13,
        );
        let (errors, warnings) = report(m.clone());
        assert_eq!(errors, Vec::<String>::new(), "{op}");
        assert_eq!(
            warnings,
            [format!(
                "node 0 'ln' ({op}): warning: at opset 13 this op leans on onnxruntime's \
                 registry: {op}-1 is onnxruntime's own schema, not standard ONNX (other \
                 runtimes reject it)"
            )]
        );
        // check_model passes it: warnings are not errors.
        check(m.clone(), &[]);
        let model = Model::from_proto(m).expect("converts");
        let warning = &check_model_report(&model, &CheckOptions::default()).warnings[0];
        let CheckError::Schema { problem, .. } = warning else {
            panic!("not a schema problem: {warning:?}");
        };
        assert_eq!(
            problem,
            &SchemaProblem::OnnxRuntimeOnly {
                callee: format!("{op}-1"),
                opset: 13
            }
        );
    }
    // From opset 17 on LayerNormalization is onnx's: no warning. SimplifiedLayerNormalization
    // stays onnxruntime's at every opset.
    let m = with_opset(
        one_node(
            node("LayerNormalization", "ln", &["x", "x"], &["y"]),
            &["x"],
            &["y"],
        ),
        "",
        17,
    );
    assert_eq!(report(m), (vec![], vec![]));
    let m = with_opset(
        one_node(
            node("SimplifiedLayerNormalization", "ln", &["x", "x"], &["y"]),
            &["x"],
            &["y"],
        ),
        "",
        23,
    );
    assert_eq!(report(m).1.len(), 1);
    // onnxruntime's schema still checks the node: a third input is one too many.
    let m = with_opset(
        one_node(
            node(
                "SimplifiedLayerNormalization",
                "ln",
                &["x", "x", "x"],
                &["y"],
            ),
            &["x"],
            &["y"],
        ),
        "",
        13,
    );
    let (errors, warnings) = report(m);
    assert_eq!(
        errors,
        ["node 0 'ln' (SimplifiedLayerNormalization): input 2 given but SimplifiedLayerNormalization-1 takes at most 2 inputs"]
    );
    assert_eq!(warnings.len(), 1);
}
