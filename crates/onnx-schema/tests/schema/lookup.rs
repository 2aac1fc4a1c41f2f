//! Counts, domains, opset ranges and the binding rule of `SchemaRegistry::lookup`.

use onnx_schema::{registry, try_registry, NodeDeterminism, OpsetRange, SchemaOrigin};

#[test]
fn embedded_table_parses_and_is_onnx_1_23_2() {
    let reg = try_registry().expect("the committed schemas.json and contrib_schemas.json parse");
    assert_eq!(reg.onnx_version(), "1.23.2");
    assert_eq!(reg.onnxruntime_version(), Some("1.31.1"));
}

#[test]
fn counts_schema_versions_per_domain() {
    // From onnx 1.23.2: len(onnx.defs.get_all_schemas_with_history()) == 659, by domain below;
    // from onnxruntime 1.31.1 (scripts/gen_contrib_schema.py's selection of
    // get_all_operator_schema()): 162 more, 136 in com.microsoft (in the registry) and 26 in
    // the default domain (apart, in onnxruntime_extensions()).
    let reg = registry();
    assert_eq!(reg.len(), 659 + 136);
    assert!(!reg.is_empty());
    assert_eq!(reg.iter().count(), 659 + 136);
    assert_eq!(onnx_schema::onnxruntime_extensions().len(), 26);
    let domains: Vec<&str> = reg.domains().collect();
    assert_eq!(
        domains,
        [
            "",
            "ai.onnx.ml",
            "ai.onnx.preview",
            "ai.onnx.preview.training",
            "com.microsoft"
        ]
    );
    let count = |d: &str, origin: SchemaOrigin| {
        reg.iter()
            .filter(|s| s.domain == d && s.origin == origin)
            .count()
    };
    assert_eq!(count("", SchemaOrigin::Onnx), 629);
    assert_eq!(count("ai.onnx.ml", SchemaOrigin::Onnx), 25);
    assert_eq!(count("ai.onnx.preview.training", SchemaOrigin::Onnx), 4);
    assert_eq!(count("ai.onnx.preview", SchemaOrigin::Onnx), 1);
    assert_eq!(count("", SchemaOrigin::OnnxRuntime), 0);
    assert_eq!(count("com.microsoft", SchemaOrigin::OnnxRuntime), 136);
    assert_eq!(count("com.microsoft", SchemaOrigin::Onnx), 0);
    // 203 distinct op types in onnx's default domain (onnxruntime's own are apart); 136 in
    // com.microsoft.
    let onnx_ops = reg
        .op_types("ai.onnx")
        .filter(|op| reg.versions("", op).iter().any(|s| !s.is_onnxruntime()))
        .count();
    assert_eq!(onnx_ops, 203);
    assert_eq!(reg.op_types("ai.onnx").count(), 203);
    assert_eq!(reg.op_types("com.microsoft").count(), 136);
}

#[test]
fn iteration_is_sorted_and_versions_ascend() {
    let reg = registry();
    let keys: Vec<(&str, &str, i64)> = reg
        .iter()
        .map(|s| (s.domain.as_str(), s.name.as_str(), s.since_version))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        keys, sorted,
        "iter() is sorted by (domain, name, since_version), no duplicates"
    );
    for domain in reg.domains() {
        for op in reg.op_types(domain) {
            let versions = reg.versions(domain, op);
            assert!(!versions.is_empty());
            assert!(versions
                .windows(2)
                .all(|w| w[0].since_version < w[1].since_version));
            assert!(versions.iter().all(|s| s.name == op && s.domain == domain));
        }
    }
}

#[test]
fn opset_ranges_match_onnx() {
    // onnx.defs.onnx_opset_version() == 28; C.schema_version_map() gives the ranges.
    let reg = registry();
    assert_eq!(reg.max_opset(""), Some(28));
    assert_eq!(reg.max_opset("ai.onnx"), Some(28));
    assert_eq!(reg.max_opset("ai.onnx.ml"), Some(5));
    assert_eq!(reg.max_opset("ai.onnx.preview.training"), Some(1));
    assert_eq!(reg.max_opset("ai.onnx.preview"), Some(1));
    assert_eq!(reg.max_opset("ai.onnx.training"), Some(1));
    // onnxruntime registers com.microsoft at opset 1 only.
    assert_eq!(reg.max_opset("com.microsoft"), Some(1));
    assert_eq!(reg.max_opset("com.example"), None);
    assert_eq!(reg.opset_range(""), Some(OpsetRange { min: 1, max: 28 }));
    assert_eq!(reg.opset_ranges().count(), 6);
    // Every schema's since_version lies inside its domain's range.
    for s in reg.iter() {
        let range = reg
            .opset_range(&s.domain)
            .expect("every schema domain has a range");
        assert!(
            (range.min..=range.max).contains(&s.since_version),
            "{}",
            s.id()
        );
    }
}

#[test]
fn release_table_gives_minimal_ir_versions() {
    // onnx.helper.find_min_ir_version_for([make_opsetid("", v)]) for v = 1, 5, 9, 13, 21, 28.
    let reg = registry();
    let got: Vec<Option<i64>> = [1, 5, 9, 13, 21, 28]
        .into_iter()
        .map(|v| reg.min_ir_version_for_opset(v))
        .collect();
    assert_eq!(
        got,
        [Some(3), Some(3), Some(4), Some(7), Some(10), Some(14)]
    );
    assert_eq!(reg.min_ir_version_for_opset(29), None);
    let last = reg.release_table().last().expect("non-empty release table");
    assert_eq!((last.release.as_str(), last.ai_onnx), ("1.23.0", 28));
}

/// Asserts `lookup(domain, op, opset)` binds the schema with `expected` since_version.
fn check_lookup(domain: &str, op: &str, opset: i64, expected: Option<i64>) {
    let got = registry()
        .lookup(domain, op, opset)
        .map(|s| s.since_version);
    assert_eq!(got, expected, "lookup({domain:?}, {op:?}, {opset})");
}

#[test]
fn lookup_binds_highest_since_version_not_above_opset() {
    // Expected values from onnx.defs.get_schema(op, opset, domain).since_version (1.23.2);
    // `None` where get_schema raises SchemaError.
    let cases: &[(&str, &str, i64, Option<i64>)] = &[
        ("", "Softmax", 11, Some(11)),
        ("", "Softmax", 12, Some(11)),
        ("", "Softmax", 13, Some(13)),
        ("", "Softmax", 28, Some(13)),
        ("", "Relu", 5, Some(1)),
        ("", "Relu", 12, Some(6)),
        ("", "Relu", 13, Some(13)),
        ("", "Relu", 14, Some(14)),
        ("", "Relu", 28, Some(14)),
        ("", "Conv", 13, Some(11)),
        ("", "LayerNormalization", 28, Some(17)),
        ("", "LayerNormalization", 17, Some(17)),
        ("ai.onnx.ml", "ZipMap", 5, Some(1)),
        // Below an op's introduction there is no schema.
        ("", "Gelu", 19, None),
        ("", "Gelu", 20, Some(20)),
        ("", "RMSNormalization", 22, None),
        ("", "Softmax", 0, None),
        // Unknown ops and domains.
        ("", "NoSuchOp", 13, None),
        ("com.example", "Softmax", 13, None),
        ("com.microsoft", "Softmax", 13, None),
        // "ai.onnx.ml" is not the default domain.
        ("ai.onnx.ml", "Softmax", 13, None),
        ("", "ZipMap", 13, None),
    ];
    for &(domain, op, opset, expected) in cases {
        check_lookup(domain, op, opset, expected);
    }
}

#[test]
fn ai_onnx_is_the_default_domain() {
    let reg = registry();
    for s in reg.iter().filter(|s| s.domain.is_empty()) {
        let via_alias = reg.lookup("ai.onnx", &s.name, s.since_version);
        assert_eq!(via_alias.map(|a| a.id()), Some(s.id()));
    }
    assert_eq!(reg.versions("ai.onnx", "Add"), reg.versions("", "Add"));
}

#[test]
fn deprecated_schemas_are_returned_and_flagged() {
    // onnx: get_schema("Upsample", 28).since_version == 10 and .deprecated is True.
    let upsample = registry()
        .lookup("", "Upsample", 28)
        .expect("Upsample binds");
    assert_eq!(upsample.since_version, 10);
    assert!(upsample.deprecated);
    assert!(
        !registry()
            .lookup("", "Resize", 28)
            .expect("Resize")
            .deprecated
    );
}

#[test]
fn determinism_flags_match_onnx() {
    // onnx: NodeDeterminism.NonDeterministic for RandomNormal-22, Dropout-13, If-21;
    // Deterministic for Add-14.
    let reg = registry();
    let det = |op: &str, v: i64| reg.lookup("", op, v).map(|s| s.node_determinism);
    assert_eq!(
        det("RandomNormal", 22),
        Some(NodeDeterminism::NonDeterministic)
    );
    assert_eq!(det("Dropout", 13), Some(NodeDeterminism::NonDeterministic));
    assert_eq!(det("If", 21), Some(NodeDeterminism::NonDeterministic));
    assert_eq!(det("Add", 14), Some(NodeDeterminism::Deterministic));
    assert!(!reg
        .lookup("", "Bernoulli", 22)
        .expect("Bernoulli")
        .is_deterministic());
    // 607 of 659 schema versions are deterministic.
    assert_eq!(reg.iter().filter(|s| s.is_deterministic()).count(), 607);
}

#[test]
fn onnxruntime_schemas_join_the_registry() {
    // onnxruntime 1.31.1: get_all_operator_schema() has com.microsoft:Attention-1 (2 to 7 inputs,
    // required num_heads), LayerNormalization-1 and SimplifiedLayerNormalization-1 in the default
    // domain (experimental); onnx has LayerNormalization from 17 only.
    let reg = registry();
    let attention = reg
        .lookup("com.microsoft", "Attention", 1)
        .expect("com.microsoft:Attention-1");
    assert_eq!(attention.since_version, 1);
    assert_eq!(attention.origin, SchemaOrigin::OnnxRuntime);
    assert_eq!((attention.min_input, attention.max_input), (2, 7));
    assert!(attention.attribute("num_heads").is_some_and(|a| a.required));
    // Any opset of com.microsoft binds its since-1 schemas.
    assert_eq!(
        reg.lookup("com.microsoft", "MatMulNBits", 5)
            .map(|s| s.since_version),
        Some(1)
    );
    // onnxruntime's own versions of onnx-domain ops are apart: nothing binds them in place of
    // onnx's, and the checker finds them there.
    let ext = onnx_schema::onnxruntime_extensions();
    for opset in [1, 13, 16] {
        assert!(reg.lookup("", "LayerNormalization", opset).is_none());
        let ln = ext
            .lookup("", "LayerNormalization", opset)
            .expect("onnxruntime's LayerNormalization-1");
        assert_eq!(
            (ln.since_version, ln.origin),
            (1, SchemaOrigin::OnnxRuntime)
        );
        let simplified = ext
            .lookup("ai.onnx", "SimplifiedLayerNormalization", opset)
            .expect("onnxruntime's SimplifiedLayerNormalization-1");
        assert!(simplified.is_onnxruntime());
    }
    assert_eq!(
        reg.lookup("", "MeanVarianceNormalization", 8)
            .map(|s| s.since_version),
        None
    );
    assert!(ext
        .iter()
        .all(|s| s.is_onnxruntime() && !s.domain.starts_with("com.microsoft")));
    for opset in [17, 28] {
        let ln = reg.lookup("", "LayerNormalization", opset).expect("LN-17");
        assert_eq!((ln.since_version, ln.origin), (17, SchemaOrigin::Onnx));
    }
    // The runtime-internal domains and ops are left out.
    assert!(reg.opset_range("com.microsoft.nchwc").is_none());
    assert!(reg.opset_range("com.ms.internal.nhwc").is_none());
    assert!(!reg.contains("", "MemcpyToHost"));
    // onnx's schemas are all Onnx-origin and keep their determinism; onnxruntime does not say.
    assert!(reg
        .iter()
        .filter(|s| s.is_onnxruntime())
        .all(|s| s.node_determinism == NodeDeterminism::Unknown));
    assert_eq!(
        reg.lookup("", "Relu", 14).map(|s| s.origin),
        Some(SchemaOrigin::Onnx)
    );
}
