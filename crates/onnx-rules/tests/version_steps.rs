//! The generated version steps ([`onnx_rules::version_steps`]): the text the built-in rule set
//! loads as `rules/version/steps.rules`, as a snapshot, so that a change of the generator, the
//! version tables or the schema table shows as a diff of the steps.

#[test]
fn generated_version_steps() {
    let text = onnx_rules::version_steps::generate();
    assert_eq!(text, onnx_rules::version_steps::steps_text());
    insta::assert_snapshot!(text);
}

/// The generated op -> body rules ([`onnx_rules::version_steps::bodies_text`]), loaded as
/// `rules/version/bodies.rules`, as a snapshot.
#[test]
fn generated_body_rules() {
    let text = onnx_rules::version_steps::generate_bodies();
    assert_eq!(text, onnx_rules::version_steps::bodies_text());
    insta::assert_snapshot!(text);
}
