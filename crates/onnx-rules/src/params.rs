//! Logical parameters: the attributes that later opsets moved to inputs (`axes`, `split`,
//! `pads`, `min`/`max`, ...). A rule names them as attributes in every opset; this table says,
//! per op and schema version, where each one lives. It is shared by the checker and by the
//! compiler in onnx-egraph, so both read a rule the same way.

/// Where a logical parameter lives in one schema version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamLoc {
    /// The schema attribute of this name.
    Attr(&'static str),
    /// The (optional) input at this position.
    Input(usize),
}

/// One logical parameter of an op at one schema version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogicalParam {
    pub name: &'static str,
    pub loc: ParamLoc,
}

const fn attr(name: &'static str) -> LogicalParam {
    LogicalParam {
        name,
        loc: ParamLoc::Attr(name),
    }
}

const fn input(name: &'static str, slot: usize) -> LogicalParam {
    LogicalParam {
        name,
        loc: ParamLoc::Input(slot),
    }
}

/// Reductions whose `axes` moved to an input at opset 18 (ReduceSum moved at 13).
pub const REDUCTIONS: &[&str] = &[
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
];

/// The logical parameters of a default-domain op at a schema version (empty for ops without
/// attribute-to-input moves: their attributes are addressed by their schema names).
pub fn logical_params(op_type: &str, since_version: i64) -> Vec<LogicalParam> {
    let v = since_version;
    match op_type {
        "Squeeze" | "Unsqueeze" => vec![if v < 13 {
            attr("axes")
        } else {
            input("axes", 1)
        }],
        "ReduceSum" => vec![if v < 13 {
            attr("axes")
        } else {
            input("axes", 1)
        }],
        op if REDUCTIONS.contains(&op) => {
            vec![if v < 18 {
                attr("axes")
            } else {
                input("axes", 1)
            }]
        }
        "Split" if v >= 2 => vec![if v < 13 {
            attr("split")
        } else {
            input("split", 1)
        }],
        "Clip" => {
            if v < 11 {
                vec![attr("min"), attr("max")]
            } else {
                vec![input("min", 1), input("max", 2)]
            }
        }
        "Pad" => {
            if v < 2 {
                // Pad-1 calls them `paddings`.
                let pads = LogicalParam {
                    name: "pads",
                    loc: ParamLoc::Attr("paddings"),
                };
                vec![pads, attr("value")]
            } else if v < 11 {
                vec![attr("pads"), attr("value")]
            } else if v < 18 {
                vec![input("pads", 1), input("value", 2)]
            } else {
                vec![input("pads", 1), input("value", 2), input("axes", 3)]
            }
        }
        "Slice" => {
            if v < 10 {
                vec![attr("starts"), attr("ends"), attr("axes")]
            } else {
                vec![
                    input("starts", 1),
                    input("ends", 2),
                    input("axes", 3),
                    input("steps", 4),
                ]
            }
        }
        "TopK" => vec![if v < 10 { attr("k") } else { input("k", 1) }],
        "Reshape" => vec![if v < 5 {
            attr("shape")
        } else {
            input("shape", 1)
        }],
        "Dropout" => {
            if v < 12 {
                vec![attr("ratio")]
            } else {
                vec![input("ratio", 1), input("training_mode", 2)]
            }
        }
        // Upsample-1 has `height_scale` and `width_scale` instead: no logical parameter.
        "Upsample" if v < 7 => Vec::new(),
        "Upsample" => vec![if v < 9 {
            attr("scales")
        } else {
            input("scales", 1)
        }],
        // DFT's `axis` became an input at 20 (its default moved from 1 to -2).
        "DFT" => vec![if v < 20 {
            attr("axis")
        } else {
            input("axis", 2)
        }],
        "Resize" => {
            if v < 11 {
                vec![input("scales", 1)]
            } else {
                vec![input("roi", 1), input("scales", 2), input("sizes", 3)]
            }
        }
        _ => Vec::new(),
    }
}

/// Logical parameters whose input is a 1-D tensor of one element where the attribute was a
/// scalar (TopK's `k` from 10): (op, input slot). A scalar written there becomes `[v]`.
pub fn one_element_input(op_type: &str, slot: usize) -> bool {
    matches!((op_type, slot), ("TopK", 1))
}

/// The input slots that hold logical parameters of a default-domain op at a schema version
/// (a rule's positional inputs skip them).
pub fn logical_input_slots(op_type: &str, since_version: i64) -> Vec<usize> {
    logical_params(op_type, since_version)
        .into_iter()
        .filter_map(|p| match p.loc {
            ParamLoc::Input(s) => Some(s),
            ParamLoc::Attr(_) => None,
        })
        .collect()
}

/// The logical parameter `name` of an op at a schema version, if it has one by that name.
pub fn logical_param(op_type: &str, since_version: i64, name: &str) -> Option<LogicalParam> {
    logical_params(op_type, since_version)
        .into_iter()
        .find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_move_at_their_opsets() {
        assert_eq!(
            logical_param("Squeeze", 11, "axes").map(|p| p.loc),
            Some(ParamLoc::Attr("axes"))
        );
        assert_eq!(
            logical_param("Squeeze", 13, "axes").map(|p| p.loc),
            Some(ParamLoc::Input(1))
        );
        assert_eq!(
            logical_param("ReduceMean", 13, "axes").map(|p| p.loc),
            Some(ParamLoc::Attr("axes"))
        );
        assert_eq!(
            logical_param("ReduceMean", 18, "axes").map(|p| p.loc),
            Some(ParamLoc::Input(1))
        );
        assert_eq!(logical_param("Relu", 14, "axes"), None);
    }

    /// Every input location names an input the schema has, and every attribute location an
    /// attribute it has, at each schema version of the op.
    #[test]
    fn locations_exist_in_the_schemas() {
        let reg = onnx_schema::registry();
        let mut ops: Vec<&str> = REDUCTIONS.to_vec();
        ops.extend([
            "Squeeze",
            "Unsqueeze",
            "Split",
            "Clip",
            "Pad",
            "Slice",
            "TopK",
            "Reshape",
            "Dropout",
            "Upsample",
            "Resize",
            "DFT",
        ]);
        for op in ops {
            for s in reg.versions("", op) {
                for p in logical_params(op, s.since_version) {
                    match p.loc {
                        ParamLoc::Attr(a) => assert!(
                            s.attribute(a).is_some(),
                            "{op}-{}: no attribute {a}",
                            s.since_version
                        ),
                        ParamLoc::Input(i) => assert!(
                            i < s.max_input.max(s.inputs.len()),
                            "{op}-{}: no input {i}",
                            s.since_version
                        ),
                    }
                }
            }
        }
    }
}
