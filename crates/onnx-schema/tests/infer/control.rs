//! Control flow and sequences: If joins its branches (or picks the one a known condition
//! selects), bodies see the enclosing graph's values, Loop and Scan stack their scan outputs,
//! and sequence ops carry their element types.

use onnx_proto::AttributeProto;

use crate::support::{attr_int, float, typed, Graph};
use crate::symbolic::check;

fn graph_attr(name: &str, g: Graph) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(5),
        g: Some(g.graph),
        ..Default::default()
    }
}

/// A branch that returns `op(x)` of the outer value `x`.
fn branch(op: &str, out: &str) -> Graph {
    Graph::new(17).node(op, &["x"], &[out], vec![]).output(out)
}

#[test]
fn if_joins_branches_that_read_the_outer_scope() {
    let result = Graph::new(17)
        .input("x", float(&["batch", "3"]))
        .input("y", float(&["batch", "4"]))
        .input("cond", typed(9, &[]))
        .node(
            "If",
            &["cond"],
            &["same"],
            vec![
                graph_attr("then_branch", branch("Relu", "a")),
                graph_attr("else_branch", branch("Neg", "b")),
            ],
        )
        .node(
            "If",
            &["cond"],
            &["joined"],
            vec![
                graph_attr("then_branch", branch("Relu", "a")),
                graph_attr(
                    "else_branch",
                    Graph::new(17)
                        .node("Identity", &["y"], &["c"], vec![])
                        .output("c"),
                ),
            ],
        )
        .infer();
    check(
        &result,
        &[("same", "float[batch, 3]"), ("joined", "float[batch, ?]")],
    );
}

#[test]
fn if_with_a_known_condition_takes_one_branch() {
    let flatten = Graph::new(17)
        .node("Flatten", &["x"], &["f"], vec![])
        .output("f");
    let result = Graph::new(17)
        .input("x", float(&["batch", "3", "4"]))
        .constant("yes", &[], &[1])
        .node("Cast", &["yes"], &["cond"], vec![attr_int("to", 9)])
        .node(
            "If",
            &["cond"],
            &["picked"],
            vec![
                graph_attr("then_branch", flatten),
                graph_attr("else_branch", branch("Relu", "r")),
            ],
        )
        .infer();
    check(&result, &[("picked", "float[batch, 12]")]);
}

#[test]
fn loop_scan_outputs_stack_over_a_known_trip_count() {
    let body = Graph::new(17)
        .input("i", typed(7, &[]))
        .input("c", typed(9, &[]))
        .input("acc", float(&["?"]))
        .node("Identity", &["c"], &["c_out"], vec![])
        .node("Add", &["acc", "x"], &["acc_out"], vec![])
        .node("Identity", &["acc_out"], &["scan"], vec![])
        .output("c_out")
        .output("acc_out")
        .output("scan");
    let result = Graph::new(17)
        .input("x", float(&["2"]))
        .input("init", float(&["2"]))
        .constant("trips", &[], &[5])
        .node(
            "Loop",
            &["trips", "", "init"],
            &["final", "stacked"],
            vec![graph_attr("body", body)],
        )
        .infer();
    check(
        &result,
        &[("final", "float[2]"), ("stacked", "float[5, 2]")],
    );
}

#[test]
fn sequences_carry_element_types() {
    let result = Graph::new(17)
        .input("a", float(&["2", "3"]))
        .input("b", float(&["2", "3"]))
        .node("SequenceConstruct", &["a", "b"], &["seq"], vec![])
        .constant("pos", &[], &[0])
        .node("SequenceAt", &["seq", "pos"], &["first"], vec![])
        .node("SequenceLength", &["seq"], &["len"], vec![])
        .node(
            "ConcatFromSequence",
            &["seq"],
            &["cat"],
            vec![attr_int("axis", 0)],
        )
        .node(
            "ConcatFromSequence",
            &["seq"],
            &["stacked"],
            vec![attr_int("axis", 0), attr_int("new_axis", 1)],
        )
        .infer();
    check(
        &result,
        &[
            ("seq", "seq(tensor(float))"),
            ("first", "float[2, 3]"),
            ("len", "int64[]"),
            ("cat", "float[?, 3]"),
            ("stacked", "float[?, 2, 3]"),
        ],
    );
}
