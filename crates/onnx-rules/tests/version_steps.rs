//! The generated version steps.

#[test]
fn generated_steps_match_the_committed_file() {
    let committed = include_str!("../../../rules/version/steps.rules");
    let generated = onnx_rules::version_steps::generate();
    if generated != committed {
        std::fs::write("/tmp/gen_steps.rules", &generated).unwrap();
        panic!("differs: see /tmp/gen_steps.rules");
    }
}
