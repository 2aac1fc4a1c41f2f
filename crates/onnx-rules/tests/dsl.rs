//! The data-driven DSL tests: every `tests/pass/*.rules` file must check, and a compact
//! summary of its IR is snapshotted; every `tests/fail/*.rules` file must fail, and the full
//! rendering of its errors is snapshotted. Update with `INSTA_UPDATE=always`.

use std::fmt::Write as _;
use std::path::PathBuf;

use onnx_rules::ir::{OpsetWindow, Precision, RuleFile, VarKind};
use onnx_rules::{parse_rules, CheckOptions, GuardSig, Ty};

/// The `.rules` files of a test folder, sorted.
fn rule_files(folder: &str) -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(folder);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rules"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            let source = std::fs::read_to_string(&p).unwrap();
            (stem, source)
        })
        .collect()
}

/// Options shared by the tests: one guard registered from Rust, one name taken by another file;
/// pass files may have `=> extern` right sides, fail files may not.
fn options_extern(allow_extern: bool) -> CheckOptions {
    CheckOptions {
        extra_guards: vec![GuardSig::new("is_nchw", vec![Ty::Value], Ty::Bool)],
        taken_names: ["taken_elsewhere".to_string()].into_iter().collect(),
        allow_extern,
    }
}

fn options() -> CheckOptions {
    options_extern(false)
}

fn window(w: OpsetWindow) -> String {
    match w.max {
        Some(m) => format!("{}..{m}", w.min),
        None => format!("{}..", w.min),
    }
}

/// One block per rule: name, tags, window, epochs, variables, lets and guard.
fn summary(file: &RuleFile) -> String {
    let mut out = String::new();
    let header = file.header.lines().next().unwrap_or("");
    writeln!(out, "header: {header}").unwrap();
    for r in &file.rules {
        let mut tags = Vec::new();
        match r.tags.precision {
            Precision::Exact => tags.push("exact".to_string()),
            Precision::Tolerance(t) => tags.push(format!("tol {t}")),
            Precision::Rounding => {}
        }
        if r.tags.float_unsafe {
            tags.push("unsafe".to_string());
        }
        tags.extend(r.tags.labels.iter().cloned());
        writeln!(out, "rule {} [{}]", r.name, tags.join(", ")).unwrap();
        writeln!(out, "  doc: {}", r.doc.replace('\n', " / ")).unwrap();
        let epochs: Vec<String> = r.epochs.iter().map(|e| window(e.window)).collect();
        writeln!(
            out,
            "  window: {}  epochs: {}",
            window(r.window),
            epochs.join(" ")
        )
        .unwrap();
        let vars: Vec<String> = r
            .vars
            .iter()
            .map(|v| {
                let kind = match v.kind {
                    VarKind::Value => "value",
                    VarKind::Attr => "attr",
                    VarKind::List => "list",
                    VarKind::Rest => "rest",
                    VarKind::Op => "op",
                    VarKind::Let => "let",
                };
                format!("{}:{kind}", v.name)
            })
            .collect();
        writeln!(
            out,
            "  roots: {}  vars: {}  lets: {}  guard: {}",
            r.lhs.len(),
            vars.join(" "),
            r.lets.len(),
            if r.guard.is_some() { "yes" } else { "no" }
        )
        .unwrap();
        if !r.hints.is_empty() {
            writeln!(out, "  hints: {}", r.hints.len()).unwrap();
        }
        if r.is_extern() {
            writeln!(out, "  rhs: extern").unwrap();
        }
        if let Some(s) = r.step {
            writeln!(out, "  step: {} -> {}", s.lhs_opset, s.rhs_opset).unwrap();
        }
    }
    out
}

#[test]
fn pass() {
    let files = rule_files("pass");
    assert!(!files.is_empty());
    for (stem, source) in files {
        let path = format!("tests/pass/{stem}.rules");
        match parse_rules(&path, &source, &options_extern(true)) {
            Ok(file) => insta::assert_snapshot!(format!("pass_{stem}"), summary(&file)),
            Err(err) => panic!("{path} should check:\n{err}"),
        }
    }
}

#[test]
fn fail() {
    let files = rule_files("fail");
    assert!(!files.is_empty());
    for (stem, source) in files {
        let path = format!("tests/fail/{stem}.rules");
        match parse_rules(&path, &source, &options()) {
            Ok(_) => panic!("{path} should not check"),
            Err(err) => insta::assert_snapshot!(format!("fail_{stem}"), err.to_string()),
        }
    }
}

/// Rules registered from Rust: the left side and clauses checked like a file's, errors
/// labelled `rust rule NAME` with carets in the caller's own text.
#[test]
fn extern_rules_from_rust() {
    use onnx_rules::parse_extern_rule;
    let rule = parse_extern_rule(
        "add_zero",
        "# Add(x, 0) == x\nAdd(x, 0)\n  where is_float(x)\n  hint rank(x) == 2",
        "exact, fusion, opset 7..",
        &options(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(rule.is_extern());
    assert!(rule.rhs_terms().is_empty() && rule.terms.is_empty());
    assert_eq!(rule.doc, "Add(x, 0) == x");
    assert_eq!(rule.tags.precision, Precision::Exact);
    assert_eq!(rule.tags.labels, ["fusion"]);
    assert_eq!(rule.window, OpsetWindow { min: 7, max: None });
    assert!(rule.guard.is_some() && rule.hints.len() == 1);

    let check = |name: &str, text: &str, tags: &str| {
        parse_extern_rule(name, text, tags, &options())
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let errors = [
        (
            "unknown op and attribute",
            check(
                "fuse",
                "Add(Relux(x), LeakyRelu<beta: b>(y))\n  where b > 0.1",
                "",
            ),
        ),
        (
            "guard type error",
            check("g", "Relu(x) where rank(x) && true", ""),
        ),
        ("syntax error", check("s", "Relu(x) => Neg(x)", "")),
        ("a let", check("l", "Relu(x) let k = Neg(x)", "")),
        ("two roots", check("two", "(Relu(x), Neg(x))", "")),
        ("bad tags", check("t", "Relu(x)", "exact, tol -1")),
        ("taken name", check("taken_elsewhere", "Relu(x)", "")),
        ("bad name", check("no spaces", "Relu(x)", "")),
    ];
    let mut out = String::new();
    for (what, e) in errors {
        writeln!(out, "== {what}\n{e}").unwrap();
    }
    insta::assert_snapshot!("extern_rules_from_rust", out);
}

/// Inputs that once could have hurt a parser: none may panic or overflow the stack.
#[test]
fn nasty_inputs_do_not_panic() {
    let deep_parens = format!(
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  where {}true{}\n",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let deep_ops = format!(
        "# h\n\n# d\nrule r:\n  {}x{} => x\n",
        "Relu(".repeat(40),
        ")".repeat(40)
    );
    let long_chain = format!(
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  where {}true\n",
        "true && ".repeat(20000)
    );
    let many_nots = format!(
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  where {}true\n",
        "!".repeat(20000)
    );
    let many_negs = format!(
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  where {}1 > 0\n",
        "-".repeat(20000)
    );
    let many_index = format!(
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  where shape(x){} > 0\n",
        "[0]".repeat(20000)
    );
    let nested_list = format!(
        "# h\n\n# d\nrule r:\n  Mul(x, {}1{}) => x\n",
        "[".repeat(3000),
        "]".repeat(3000)
    );
    // At the nesting limit (64 brackets): accepted, and still no stack overflow.
    let limit_parens = format!(
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  where {}rank(x) + 1{} > 0\n",
        "(-".repeat(62),
        ")".repeat(62)
    );
    let limit_ops = format!(
        "# h\n\n# d\nrule r:\n  {}x{} => x\n",
        "Neg(".repeat(64),
        ")".repeat(64)
    );
    for ok in [&limit_parens, &limit_ops] {
        if let Err(e) = parse_rules("limit.rules", ok, &options()) {
            panic!("at the nesting limit:\n{e}");
        }
    }
    let too_deep = parse_rules("deep.rules", &deep_parens, &options()).unwrap_err();
    assert!(
        too_deep.to_string().contains("nested deeper than 64"),
        "{too_deep}"
    );
    let too_tall = parse_rules("tall.rules", &long_chain, &options()).unwrap_err();
    assert!(
        too_tall.to_string().contains("expression nested deeper"),
        "{too_tall}"
    );
    let inputs: Vec<String> = vec![
        String::new(),
        "#".into(),
        "rule".into(),
        "rule a".into(),
        "rule a:".into(),
        "rule a: =>".into(),
        "\n\n\nrule\n".into(),
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  where 99999999999999999999999 > -9223372036854775808\n".into(),
        "# h\n\n# d\nrule r:\n  Mul(x, 1e999) => x\n".into(),
        "# h\n\n# d\nrule r:\n  Split#99999999999999(x).4294967296 => x\n".into(),
        "# h\n\n# d\nrule r:\n  Softmax@0..0(x) => x\n".into(),
        "# h\n\n# d\nrule r:\n  Softmax@99999999999999999999..(x) => x\n".into(),
        "# h\n\n# d\nrule r [opset 0.., tol -1, tol nan, exact]:\n  Relu(x) => x\n".into(),
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  where \"\\q\\\" == \"ä\"\n".into(),
        "# ä\r\n\r\n# d\r\nrule ä:\r\n\tRelu(x) => x\r\n".into(),
        "# h\n\n# d\nrule r:\n  Relu(x) => x\0\n".into(),
        "# h\n\n# d\nrule r:\n  $:(x) => $f(x)\n".into(),
        "# h\n\n# d\nrule r:\n  (x, y) => (x, y)\n".into(),
        "# h\n\n# d\nrule r:\n  Transpose<..a, ..b, perm: p, perm: q>(x) => Transpose<..c>(x)\n".into(),
        "# h\n\n# d\nrule r:\n  Sum(xs.., ys..) => Sum(zs..)\n".into(),
        "# h\n\n# d\nrule r:\n  Relu(x) => x\n  let x = Relu(x)\n  let k = k\n  where a\n  where b\n".into(),
        deep_parens,
        deep_ops,
        long_chain,
        many_nots,
        many_negs,
        many_index,
        nested_list,
    ];
    for source in inputs {
        // Ok or Err, never a panic; the rendering must not panic either.
        if let Err(e) = parse_rules("nasty.rules", &source, &options()) {
            assert!(!e.to_string().is_empty());
        }
    }
}

/// Deterministic mutations of every pass file (deleted, duplicated and inserted characters,
/// truncations): the checker must never panic.
#[test]
fn mutated_files_do_not_panic() {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    const PIECES: &[&str] = &[
        "(", ")", "[", "]", "<", ">", ",", ":", "=>", "..", "?", "#", "#2", ".1", "$f", "@13..",
        "None", "_", "-", "!", "&&", "==", "\"", "\n", "rule", "let", "where", "x", "Relu", "1e-5",
    ];
    for (stem, source) in rule_files("pass") {
        let chars: Vec<char> = source.chars().collect();
        for round in 0..300 {
            let mut c = chars.clone();
            for _ in 0..1 + round % 4 {
                let at = next(c.len() + 1);
                match next(4) {
                    0 if at < c.len() => {
                        let len = 1 + next(8);
                        c.drain(at..(at + len).min(c.len()));
                    }
                    1 => {
                        let piece = PIECES[next(PIECES.len())];
                        c.splice(at..at, piece.chars());
                    }
                    2 => c.truncate(at),
                    _ if at < c.len() => {
                        let len = (1 + next(20)).min(c.len() - at);
                        let copy: Vec<char> = c[at..at + len].to_vec();
                        c.splice(at..at, copy);
                    }
                    _ => {}
                }
            }
            let mutated: String = c.into_iter().collect();
            let result = std::panic::catch_unwind(|| {
                let _ = parse_rules("m.rules", &mutated, &options()).map_err(|e| e.to_string());
            });
            assert!(
                result.is_ok(),
                "{stem} round {round} panicked on:\n{mutated}"
            );
        }
    }
}
