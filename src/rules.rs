//! Rule files: the built-in ones (`rules/*.rules`, embedded in the binary) and a user's, parsed
//! and checked together (rule names are unique across all of them) into one [`RuleSet`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use onnx_egraph::RuleSet;
use onnx_rules::ir::RuleFile;
use onnx_rules::CheckOptions;

use crate::Error;

/// The built-in rule files: (path in the repository, text).
pub const BUILTIN_RULE_FILES: &[(&str, &str)] = &[
    (
        "rules/cleanup.rules",
        include_str!("../rules/cleanup.rules"),
    ),
    ("rules/fusion.rules", include_str!("../rules/fusion.rules")),
    (
        "rules/elementwise.rules",
        include_str!("../rules/elementwise.rules"),
    ),
    (
        "rules/activation.rules",
        include_str!("../rules/activation.rules"),
    ),
    ("rules/conv.rules", include_str!("../rules/conv.rules")),
    ("rules/shape.rules", include_str!("../rules/shape.rules")),
    ("rules/reduce.rules", include_str!("../rules/reduce.rules")),
    ("rules/bodies.rules", include_str!("../rules/bodies.rules")),
    ("rules/matmul.rules", include_str!("../rules/matmul.rules")),
];

/// The built-in target rules: rewrites into one runtime's own ops (`rules/onnxruntime.rules`,
/// onnxruntime's `com.microsoft` contrib ops). Never part of `builtin`: only a pipeline that
/// names one (`builtin:onnxruntime`, the `onnxruntime` pipeline of `--target onnxruntime`) runs
/// it; `rules list`, `check` and `explain` include them.
pub const TARGET_RULE_FILES: &[(&str, &str)] = &[(
    "rules/onnxruntime.rules",
    include_str!("../rules/onnxruntime.rules"),
)];

/// The built-in version rules (`rules/version/*.rules`): rewrites that only a conversion needs,
/// such as an operator written with the older operators of its function body. They run in a
/// phase of their own when a target opset is set, after the pipeline's phases, and the target's
/// extraction keeps them only where the op is not legal at the target. The version steps are
/// not a file: onnx-rules generates them from the schemas and onnx-schema's version tables
/// ([`onnx_rules::version_steps`]), loaded under the name `rules/version/steps.rules`; nor are
/// the ops written as their schemas' function bodies, loaded as `rules/version/bodies.rules`.
pub static VERSION_RULE_FILES: std::sync::LazyLock<[(&str, &str); 4]> =
    std::sync::LazyLock::new(|| {
        [
            (
                "rules/version/decompose.rules",
                include_str!("../rules/version/decompose.rules"),
            ),
            (
                "rules/version/moves.rules",
                include_str!("../rules/version/moves.rules"),
            ),
            (
                onnx_rules::version_steps::STEPS_ORIGIN,
                onnx_rules::version_steps::steps_text(),
            ),
            (
                onnx_rules::version_steps::BODIES_ORIGIN,
                onnx_rules::version_steps::bodies_text(),
            ),
        ]
    });

/// Which rules to load.
#[derive(Debug, Clone, Default)]
pub struct RuleSelection {
    /// Leave out the built-in files.
    pub no_builtin: bool,
    /// A user's rule files, after the built-in ones.
    pub files: Vec<PathBuf>,
    /// Run rules tagged `unsafe` (float-unsafe) too.
    pub float_unsafe: bool,
    /// With the built-in files, the version rules too ([`VERSION_RULE_FILES`]).
    pub version: bool,
    /// With the built-in files, the target rules too ([`TARGET_RULE_FILES`]).
    pub targets: bool,
}

/// Parses and checks the built-in files and the user's; every error of every file is
/// reported (the error's text is the rendering of all of them).
pub fn load_rule_files(sel: &RuleSelection) -> Result<Vec<RuleFile>, Error> {
    let mut sources: Vec<(String, String)> = Vec::new();
    if !sel.no_builtin {
        for (p, t) in BUILTIN_RULE_FILES {
            sources.push((p.to_string(), t.to_string()));
        }
        if sel.version {
            for (p, t) in VERSION_RULE_FILES.iter() {
                sources.push((p.to_string(), t.to_string()));
            }
        }
        if sel.targets {
            for (p, t) in TARGET_RULE_FILES {
                sources.push((p.to_string(), t.to_string()));
            }
        }
    }
    for f in &sel.files {
        let text = read_rule_file(f)?;
        sources.push((f.display().to_string(), text));
    }
    parse_all(&sources)
}

/// Reads a rule file as UTF-8.
pub fn read_rule_file(f: &Path) -> Result<String, Error> {
    std::fs::read_to_string(f).map_err(|source| Error::RuleFile {
        path: f.to_path_buf(),
        source,
    })
}

/// Parses several sources, names unique across them; all errors at once. The last few
/// successful parses are kept (by their sources' paths and texts), so optimizers built one
/// after another in a process (a conversion per model) parse the built-in files once.
pub fn parse_all(sources: &[(String, String)]) -> Result<Vec<RuleFile>, Error> {
    type Entry = (Vec<(String, String)>, Vec<RuleFile>);
    static CACHE: std::sync::Mutex<Vec<Entry>> = std::sync::Mutex::new(Vec::new());
    if let Ok(cache) = CACHE.lock() {
        if let Some((_, files)) = cache.iter().find(|(k, _)| k.as_slice() == sources) {
            return Ok(files.clone());
        }
    }
    let files = parse_uncached(sources)?;
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= 8 {
            cache.remove(0);
        }
        cache.push((sources.to_vec(), files.clone()));
    }
    Ok(files)
}

fn parse_uncached(sources: &[(String, String)]) -> Result<Vec<RuleFile>, Error> {
    let mut taken = BTreeSet::new();
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for (path, text) in sources {
        let options = CheckOptions {
            taken_names: taken.clone(),
            ..Default::default()
        };
        match onnx_rules::parse_rules(path, text, &options) {
            Ok(f) => {
                taken.extend(f.rules.iter().map(|r| r.name.clone()));
                files.push(f);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(files)
    } else {
        Err(Error::Rules(errors))
    }
}

/// The phase of the version rules, run after a pipeline's phases when a target opset is set.
pub fn version_phase() -> Result<onnx_egraph::Phase, Error> {
    let sources: Vec<(String, String)> = VERSION_RULE_FILES
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let mut set = RuleSet::new();
    for f in parse_all(&sources)? {
        set.add_file(f);
    }
    let mut phase = onnx_egraph::Phase::new("version", std::sync::Arc::new(set));
    // Steps chain one version at a time (Cast 6 -> 9 -> 13 -> 19 -> ... takes 8).
    phase.iter_limit = 16;
    phase.node_limit = 200_000;
    phase.time_limit = std::time::Duration::from_secs(20);
    Ok(phase)
}

/// The built-in fusions into a standard op that the target opset has and the source opset does
/// not (LayerNormalization from 17, Gelu from 20, ...): what a conversion up runs after the
/// version steps, so that it lands on the target's fused ops. `None` when no such rule exists.
/// Float-unsafe rules are left out.
pub fn upward_fusion_phase(source: i64, target: i64) -> Result<Option<onnx_egraph::Phase>, Error> {
    if target <= source {
        return Ok(None);
    }
    let reg = onnx_schema::registry();
    let introduced = |op: &str| reg.versions("", op).iter().map(|s| s.since_version).min();
    let mut set = RuleSet::new();
    let mut any = false;
    for mut f in load_rule_files(&RuleSelection::default())? {
        f.rules.retain(|r| {
            let fused = r.tags.labels.iter().any(|l| l == "fusion") && !r.tags.float_unsafe;
            let root = r.rhs_terms().first().map(|&t| r.term(t));
            let Some(onnx_rules::ir::Term::Op(o)) = root else {
                return false;
            };
            let onnx_rules::ir::OpHead::Named(op) = &o.head else {
                return false;
            };
            fused
                && op.domain.is_empty()
                && introduced(&op.op_type).is_some_and(|v| v > source && v <= target)
        });
        any |= !f.rules.is_empty();
        set.add_file(f);
    }
    if !any {
        return Ok(None);
    }
    Ok(Some(onnx_egraph::Phase::new(
        "upward fusion",
        std::sync::Arc::new(set),
    )))
}

/// The rule set of a selection.
pub fn load_rule_set(sel: &RuleSelection) -> Result<RuleSet, Error> {
    let mut set = RuleSet::new();
    for f in load_rule_files(sel)? {
        set.add_file(f);
    }
    set.float_unsafe = sel.float_unsafe;
    Ok(set)
}

/// The saturation phases of a rule selection: one phase with every selected rule.
pub fn rule_phases(sel: &RuleSelection) -> Result<Vec<onnx_egraph::Phase>, Error> {
    let set = std::sync::Arc::new(load_rule_set(sel)?);
    Ok(vec![onnx_egraph::Phase::new("rules", set)])
}

/// What `--skip` ([`crate::Optimizer::skip`]) leaves out, resolved against everything an
/// optimizer can run: rules by name, by file (the path as loaded, its file name or its stem:
/// `fusion`, `fusion.rules`, `rules/fusion.rules`) or by label (`[fusion]`), and passes by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Skipped {
    /// The rules left out, by name.
    pub rules: BTreeSet<String>,
    /// The passes left out, by name.
    pub passes: BTreeSet<String>,
}

/// Whether `entry` names the rule file loaded as `path`.
fn names_file(entry: &str, path: &str) -> bool {
    let p = Path::new(path);
    path == entry
        || path.ends_with(&format!("/{entry}"))
        || p.file_name().is_some_and(|f| f == entry)
        || p.file_stem().is_some_and(|f| f == entry)
}

/// Resolves `--skip` entries against the rule files an optimizer loads, its rules written in
/// Rust and the pass names; an entry that names nothing is an [`Error::UnknownSkip`] with the
/// closest names.
pub(crate) fn resolve_skips(
    entries: &[String],
    files: &[RuleFile],
    rust_rules: &[String],
    passes: &[&str],
) -> Result<Skipped, Error> {
    let mut out = Skipped::default();
    for entry in entries {
        let mut found = false;
        if passes.contains(&entry.as_str()) {
            out.passes.insert(entry.clone());
            found = true;
        }
        if rust_rules.contains(entry) {
            out.rules.insert(entry.clone());
            found = true;
        }
        for f in files {
            let whole = names_file(entry, &f.path);
            for r in &f.rules {
                if whole || r.name == *entry || r.tags.labels.contains(entry) {
                    out.rules.insert(r.name.clone());
                    found = true;
                }
            }
        }
        if !found {
            let mut names: BTreeSet<String> = passes.iter().map(|p| p.to_string()).collect();
            names.extend(rust_rules.iter().cloned());
            for f in files {
                names.insert(f.path.clone());
                for r in &f.rules {
                    names.insert(r.name.clone());
                    names.extend(r.tags.labels.iter().cloned());
                }
            }
            let mut close: Vec<(f64, String)> = names
                .into_iter()
                .map(|n| (strsim::jaro_winkler(entry, &n), n))
                .filter(|(score, _)| *score >= 0.85)
                .collect();
            close.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            return Err(Error::UnknownSkip {
                name: entry.clone(),
                close: close.into_iter().take(5).map(|(_, n)| n).collect(),
            });
        }
    }
    Ok(out)
}
