//! Parse errors: each malformed input gives the expected message at the expected line and
//! column, and the rendering shows the line with a caret.

use onnx_text::{parse_graph, parse_model, parse_node, ParseError, ParseErrorKind};

/// Asserts that `result` is an error at `line`:`column` whose message is `message`.
fn check<T: std::fmt::Debug>(
    result: Result<T, ParseError>,
    line: usize,
    column: usize,
    message: &str,
) {
    let err = result.expect_err("the input is malformed");
    assert_eq!(
        (err.line, err.column, err.message().as_str()),
        (line, column, message),
        "\n{}",
        err.render()
    );
}

const HEADER: &str = "<ir_version: 8, opset_import: [\"\" : 17]>\n";

#[test]
fn missing_closing_brace() {
    check(
        parse_model(&format!(
            "{HEADER}g (float[N] X) => (float[N] Y) {{\n   Y = Relu (X)\n"
        )),
        4,
        1,
        "expected `=`, found the end of the input",
    );
}

#[test]
fn misspelled_type_reads_as_a_name() {
    check(
        parse_graph("g (flaot[N] X) => (Y) { Y = Relu (X) }"),
        1,
        9,
        "expected `)`, found `[`",
    );
}

#[test]
fn unknown_attribute_type() {
    check(
        parse_node("Y = LeakyRelu <alpha: flot = 0.1> (X)"),
        1,
        23,
        "expected an attribute type (float, int, string, tensor, graph, sparse_tensor, type_proto, floats, ints, strings, tensors, graphs, sparse_tensors, type_protos), found `flot`",
    );
}

#[test]
fn attribute_value_of_another_type() {
    check(
        parse_node("Y = Flatten <axis: int = 1.5> (X)"),
        1,
        26,
        "attribute `axis`: declared int, but the value is float",
    );
    check(
        parse_node("Y = Flatten <axis: ints = [1, \"a\"]> (X)"),
        1,
        31,
        "attribute `axis`: declared ints, but the value is a list holding string",
    );
    check(
        parse_node("Y = Squeeze <axes = []> (X)"),
        1,
        21,
        "attribute `axes`: an empty list needs a type annotation (`name: ints = []`)",
    );
}

#[test]
fn unterminated_string() {
    check(
        parse_node("Y = Pad <mode: string = \"constant> (X)"),
        1,
        25,
        "string literal is not closed",
    );
}

#[test]
fn numbers_out_of_range() {
    check(
        parse_graph("g () => (Y) <float[1] w = {1e39}> { Y = Identity (w) }"),
        1,
        28,
        "1e39 does not fit float",
    );
    check(
        parse_graph("g () => (Y) <int8[1] w = {3000000000}> { Y = Identity (w) }"),
        1,
        27,
        "3000000000 does not fit int32",
    );
    check(
        parse_graph("g () => (Y)\n<\n#@ storage: raw\nuint8[2] w = {1, 256}> { Y = Identity (w) }"),
        4,
        18,
        "tensor `w`: value does not fit uint8",
    );
}

#[test]
fn tensor_needs_numeric_dimensions() {
    check(
        parse_graph("g () => (Y) <float[N] w = {1}> { Y = Identity (w) }"),
        1,
        27,
        "tensor `w`: a tensor's dimensions must be numbers",
    );
}

#[test]
fn unknown_header_key() {
    check(
        parse_model("<ir_verison: 8>\ng () => () {}"),
        1,
        2,
        "unknown model header key `ir_verison`",
    );
}

#[test]
fn misplaced_and_unknown_annotations() {
    check(
        parse_graph("g (X) => (Y) {\n   Y = Relu (X)  #@ doc_string: \"late\"\n}"),
        2,
        18,
        "annotation (`#@`) not allowed here: annotations go on the lines before a model, graph, node, attribute, value, tensor or function",
    );
    check(
        parse_graph("#@ doc_string: \"ok\"\n#@ color: \"red\"\ng (X) => (Y) { Y = Relu (X) }"),
        2,
        4,
        "unknown graph annotation `color` (known: default_node_domain, default_tensor_name, default_tensor_storage, name, doc_string, metadata_props, sparse_initializer, quantization_annotation)",
    );
    // An error on the second line of a multi-line annotation points into that line.
    check(
        parse_graph("   #@ doc_string: \"two\n   #@ lines\" metadata_props: [\"k\" \"v\"]\ng (X) => (Y) { Y = Relu (X) }"),
        2,
        35,
        "expected `:`, found a string literal",
    );
}

#[test]
fn trailing_input_and_bad_characters() {
    check(
        parse_node("Y = Relu (X) extra"),
        1,
        14,
        "unexpected `extra` after the end of the input",
    );
    check(
        parse_node("Y = Relu ($X)"),
        1,
        11,
        "unexpected character '$'",
    );
    check(
        parse_node("Y = Pad <mode: string = \"\\x4\"> (X)"),
        1,
        26,
        "malformed escape in string literal: `\\x` needs two hex digits",
    );
}

#[test]
fn nesting_is_bounded() {
    let deep = format!(
        "g ({}float{} X) => () {{}}",
        "seq(".repeat(100),
        ")".repeat(100)
    );
    let err = parse_graph(&deep).expect_err("too deep");
    assert_eq!(err.kind, ParseErrorKind::TooDeep(64));
}

#[test]
fn rendering_shows_the_line_and_a_caret() {
    let err =
        parse_graph("g (float[N] X) => (Y)\n{ Y = Relu (X) ]").expect_err("bad closing bracket");
    assert_eq!(
        err.render(),
        "error at line 2, column 16: expected `=`, found `]`\n  |\n2 | { Y = Relu (X) ]\n  |                ^"
    );
}

#[test]
fn deeply_nested_graphs_parse_up_to_the_limit() {
    let wrap = "g () => (y) { y = If (c) <then_branch: graph = INNER> }";
    let mut text = String::from("g () => () {}");
    for _ in 0..62 {
        text = wrap.replace("INNER", &text);
    }
    let graph = parse_graph(&text).unwrap_or_else(|e| panic!("{}", e.render()));
    let printed = onnx_text::print_graph(&graph, &Default::default());
    assert_eq!(parse_graph(&printed), Ok(graph));
    for _ in 0..5 {
        text = wrap.replace("INNER", &text);
    }
    let err = parse_graph(&text).expect_err("too deep");
    assert_eq!(err.kind, ParseErrorKind::TooDeep(64));
}
