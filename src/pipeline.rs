//! Pipelines as data: the passes that run, in order (`[[pass]]`, see `crate::passes`), the
//! saturation phases the `saturate` passes run, each with its rules (rule files and labels) and
//! its limits, plus the cost model and the folding budget. The built-in pipelines
//! live beside the rules (`rules/pipelines/*.toml`, embedded in the binary); a user's pipeline
//! is a file in the same format:
//!
//! ```toml
//! description = "Cleanups first, then fusions"
//! cost = "latency"          # or "nodes"
//! fold = true               # fold constants
//! fold_unbounded = false    # fold regardless of result size
//!
//! [[pass]]                  # absent: every pass (`onnx-opt pipelines` lists them)
//! name = "saturate"
//!
//! [[pass]]
//! name = "splice-constant-ifs"
//! if_changed = "saturate"   # run only when that earlier pass changed the model
//!
//! [[phase]]
//! name = "cleanup"
//! rules = ["builtin:cleanup", "my_rules.rules"]   # built-in files by stem; paths relative to this file
//! labels = ["cleanup"]      # keep only rules with one of these labels (empty or absent: all)
//! iterations = 30           # limits; whichever stops the phase is reported
//! enodes = 200000
//! seconds = 20.0
//!
//! [[phase]]
//! name = "onnxruntime"
//! rules = ["builtin:onnxruntime", "builtin:cleanup"]
//! lowering = "onnxruntime"  # a lowering phase: runs in the `lower` pass, in an e-graph of its
//!                           # own over the extracted model, extracted under this cost model
//! ```
//!
//! `rules = ["builtin"]` names every built-in rule file (not the target files, such as
//! `onnxruntime.rules`, which a phase names by `builtin:STEM`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use onnx_egraph::{CostKind, FoldOptions, Phase, RuleSet};
use onnx_rules::ir::RuleFile;

use crate::passes::{pass_names, PassSpec};
use crate::rules::{BUILTIN_RULE_FILES, TARGET_RULE_FILES};
use crate::Error;

/// The built-in pipelines: (name, TOML text).
pub const BUILTIN_PIPELINES: &[(&str, &str)] = &[
    ("default", include_str!("../rules/pipelines/default.toml")),
    ("fast", include_str!("../rules/pipelines/fast.toml")),
    (
        "aggressive",
        include_str!("../rules/pipelines/aggressive.toml"),
    ),
    ("convert", include_str!("../rules/pipelines/convert.toml")),
    (
        "onnxruntime",
        include_str!("../rules/pipelines/onnxruntime.toml"),
    ),
];

/// The cost model's name in a pipeline file (`"latency"` or `"nodes"`), read into the e-graph's
/// [`CostKind`] itself (one type for both).
mod cost_name {
    use onnx_egraph::CostKind;

    pub fn serialize<S: serde::Serializer>(c: &CostKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(name(*c))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<CostKind, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        match text.as_str() {
            "latency" => Ok(CostKind::Latency),
            "nodes" => Ok(CostKind::NodeCount),
            "onnxruntime" => Ok(CostKind::OnnxRuntime),
            other => Err(serde::de::Error::unknown_variant(
                other,
                &["latency", "nodes", "onnxruntime"],
            )),
        }
    }

    /// The name a pipeline file gives the cost model.
    pub fn name(c: CostKind) -> &'static str {
        match c {
            CostKind::Latency => "latency",
            CostKind::NodeCount => "nodes",
            CostKind::OnnxRuntime => "onnxruntime",
        }
    }
}

/// An optional cost model's name (a lowering phase's).
mod lowering_name {
    use onnx_egraph::CostKind;

    pub fn serialize<S: serde::Serializer>(c: &Option<CostKind>, s: S) -> Result<S::Ok, S::Error> {
        match c {
            Some(c) => super::cost_name::serialize(c, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<CostKind>, D::Error> {
        super::cost_name::deserialize(d).map(Some)
    }
}

fn default_cost() -> CostKind {
    CostKind::Latency
}

/// A pipeline: phases run in order on every graph, then extraction under a cost model.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// The built-in name, or the file it was read from.
    #[serde(skip)]
    pub name: String,
    /// One line saying what the pipeline is for.
    #[serde(default)]
    pub description: String,
    /// The extraction cost model.
    #[serde(default = "default_cost", with = "cost_name")]
    pub cost: CostKind,
    /// Fold constants.
    #[serde(default = "yes")]
    pub fold: bool,
    /// Fold regardless of result size (by default a folded constant may be no larger than its
    /// constant inputs together, or 1 KiB).
    #[serde(default)]
    pub fold_unbounded: bool,
    /// The passes, in order (`[[pass]]`); absent: [`Pipeline::pass_list`]'s default.
    #[serde(rename = "pass", default, skip_serializing_if = "Vec::is_empty")]
    pub passes: Vec<PassSpec>,
    /// The saturation phases the `saturate` passes run, in order.
    #[serde(rename = "phase", default)]
    pub phases: Vec<PhaseSpec>,
    /// The directory relative rule-file paths resolve against.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

/// One phase of a pipeline.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// Shown in reports.
    pub name: String,
    /// Rule sources: `builtin` (every built-in file), `builtin:STEM` (one built-in file, such as
    /// `builtin:cleanup`), or a path relative to the pipeline file.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Keep only the rules carrying one of these labels (`[cleanup]`, `[fusion]`); empty: all.
    #[serde(default)]
    pub labels: Vec<String>,
    /// A lowering phase, extracted under this cost model (`lowering = "onnxruntime"`): it runs
    /// in the `lower` pass, in an e-graph of its own over the model the other phases extracted
    /// (rewrites into a runtime's own ops, which must not compete with the unfused forms).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "lowering_name"
    )]
    pub lowering: Option<CostKind>,
    /// Iteration limit.
    #[serde(default = "default_iterations")]
    pub iterations: usize,
    /// E-node limit.
    #[serde(default = "default_enodes")]
    pub enodes: usize,
    /// Time limit in seconds.
    #[serde(default = "default_seconds")]
    pub seconds: f64,
}

fn default_iterations() -> usize {
    30
}
fn default_enodes() -> usize {
    200_000
}
fn default_seconds() -> f64 {
    20.0
}

impl Pipeline {
    /// A built-in pipeline by name.
    pub fn builtin(name: &str) -> Result<Pipeline, Error> {
        let Some((_, text)) = BUILTIN_PIPELINES.iter().find(|(n, _)| *n == name) else {
            return Err(Error::Pipeline {
                origin: name.to_string(),
                message: format!(
                    "no built-in pipeline named '{name}' (there are: {})",
                    BUILTIN_PIPELINES
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let mut p = Pipeline::parse(text, name)?;
        p.name = name.to_string();
        Ok(p)
    }

    /// The default pipeline.
    pub fn default_pipeline() -> Pipeline {
        // The built-in files are tested to parse; a failure here is a bug in the binary.
        Pipeline::builtin("default").expect("the built-in default pipeline parses")
    }

    /// Parses pipeline text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Pipeline, Error> {
        let mut p: Pipeline = toml::from_str(text).map_err(|e| Error::Pipeline {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        p.name = origin.to_string();
        p.validate(origin)?;
        Ok(p)
    }

    /// Reads a pipeline file; relative rule paths resolve against its directory.
    pub fn from_file(path: &Path) -> Result<Pipeline, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::RuleFile {
            path: path.to_path_buf(),
            source,
        })?;
        let mut p = Pipeline::parse(&text, &path.display().to_string())?;
        p.base_dir = Some(
            path.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(".")),
        );
        Ok(p)
    }

    /// A built-in name, or else a file path.
    pub fn by_name_or_file(spec: &str) -> Result<Pipeline, Error> {
        if BUILTIN_PIPELINES.iter().any(|(n, _)| *n == spec) {
            Pipeline::builtin(spec)
        } else if Path::new(spec).exists() {
            Pipeline::from_file(Path::new(spec))
        } else {
            Pipeline::builtin(spec)
        }
    }

    /// The passes that run, in order: the `[[pass]]` list, or when the file has none, every
    /// pass (`expand-bodies`, `convert-functions`, `saturate`, `splice-constant-ifs`,
    /// `saturate-at-target`, `merge-sibling-matmuls`, `merge-sibling-matmul-pairs`,
    /// `merge-sibling-convs`, `lower`,
    /// `merge-sibling-matmul-nbits`) for a pipeline with
    /// phases, and for one without (conversion only) the first five, with
    /// `splice-constant-ifs` only after `expand-bodies` wrote a body.
    pub fn pass_list(&self) -> Vec<PassSpec> {
        if !self.passes.is_empty() {
            return self.passes.clone();
        }
        let all = pass_names();
        match self.phases.is_empty() {
            false => all.iter().map(|n| PassSpec::named(n)).collect(),
            true => all[..5]
                .iter()
                .map(|&n| PassSpec {
                    name: n.to_string(),
                    if_changed: (n == "splice-constant-ifs").then(|| "expand-bodies".to_string()),
                })
                .collect(),
        }
    }

    fn validate(&self, origin: &str) -> Result<(), Error> {
        let bad = |message: String| Error::Pipeline {
            origin: origin.to_string(),
            message,
        };
        let known = pass_names();
        for (i, p) in self.passes.iter().enumerate() {
            if !known.contains(&p.name.as_str()) {
                return Err(bad(format!(
                    "no pass named '{}' (there are: {})",
                    p.name,
                    known.join(", ")
                )));
            }
            if let Some(before) = &p.if_changed {
                if !self.passes[..i].iter().any(|q| &q.name == before) {
                    return Err(bad(format!(
                        "pass '{}': if_changed names '{before}', which is not an earlier pass",
                        p.name
                    )));
                }
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for ph in &self.phases {
            if !names.insert(ph.name.as_str()) {
                return Err(bad(format!("two phases are named '{}'", ph.name)));
            }
            if ph.rules.is_empty() {
                return Err(bad(format!(
                    "phase '{}' names no rules (`rules = [\"builtin\"]` for the built-in ones)",
                    ph.name
                )));
            }
            if !(ph.seconds.is_finite() && ph.seconds > 0.0) {
                return Err(bad(format!(
                    "phase '{}': seconds must be a positive number",
                    ph.name
                )));
            }
            for r in &ph.rules {
                if let Some(stem) = r.strip_prefix("builtin:") {
                    if builtin_file(stem).is_none() {
                        return Err(bad(format!(
                            "phase '{}': no built-in rule file '{stem}' (there are: {})",
                            ph.name,
                            BUILTIN_RULE_FILES
                                .iter()
                                .chain(TARGET_RULE_FILES)
                                .map(|(p, _)| stem_of(p))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The fold options.
    pub fn fold_options(&self) -> FoldOptions {
        FoldOptions {
            enabled: self.fold,
            budget_floor: if self.fold_unbounded {
                None
            } else {
                Some(1024)
            },
            ..FoldOptions::default()
        }
    }

    /// Every rule source the phases name, resolved: (label for errors, path or built-in key).
    fn sources(&self) -> Vec<Source> {
        let mut out: Vec<Source> = Vec::new();
        for ph in &self.phases {
            for r in &ph.rules {
                for s in self.resolve(r) {
                    if !out.contains(&s) {
                        out.push(s);
                    }
                }
            }
        }
        out
    }

    fn resolve(&self, r: &str) -> Vec<Source> {
        if r == "builtin" {
            BUILTIN_RULE_FILES
                .iter()
                .map(|(p, _)| Source::Builtin(p))
                .collect()
        } else if let Some(stem) = r.strip_prefix("builtin:") {
            builtin_file(stem)
                .map(Source::Builtin)
                .into_iter()
                .collect()
        } else {
            let p = Path::new(r);
            let full = match &self.base_dir {
                Some(d) if p.is_relative() => d.join(p),
                _ => p.to_path_buf(),
            };
            vec![Source::File(full)]
        }
    }

    /// The saturation phases: every rule file is parsed and checked once (rule names unique
    /// across all of them, every error of every file reported at once); each phase gets the
    /// rules of its files that carry one of its labels, plus the `extra` rules (a user's
    /// `--rules` files and text) and `rust` rules, which run in every phase.
    pub fn phases(&self, extra: &Extra) -> Result<Vec<Phase>, Error> {
        let (keys, files, extra_start) = self.load(extra)?;
        let (phase_files, extra_files) = files.split_at(extra_start);
        let rust = parse_rust_rules(&extra.rust, &files)?;
        let mut phases = Vec::new();
        for ph in &self.phases {
            let wanted: Vec<Source> = ph.rules.iter().flat_map(|r| self.resolve(r)).collect();
            let mut set = RuleSet::new();
            for (key, file) in keys.iter().zip(phase_files) {
                if wanted.contains(key) {
                    add_labelled(&mut set, file, &ph.labels);
                }
            }
            for file in extra_files {
                set.add_file(file.clone());
            }
            for (rule, r) in &rust {
                set.add_rust_rule(rule.clone(), r.guard.clone(), r.applier.clone())
                    .map_err(|source| Error::RustRule {
                        rule: rule.name.clone(),
                        source: Box::new(source),
                    })?;
            }
            set.float_unsafe = extra.float_unsafe;
            let mut phase = Phase::new(&ph.name, Arc::new(set));
            phase.iter_limit = ph.iterations;
            phase.node_limit = ph.enodes;
            phase.time_limit = Duration::from_secs_f64(ph.seconds);
            phase.lowering = ph.lowering;
            phases.push(phase);
        }
        Ok(phases)
    }

    /// The rule files this pipeline loads, then those of `extra`, parsed and checked.
    pub(crate) fn rule_files(&self, extra: &Extra) -> Result<Vec<RuleFile>, Error> {
        Ok(self.load(extra)?.1)
    }

    /// The pipeline's rule sources (in the order of its files), the parsed files (the
    /// pipeline's, then `extra`'s), and where `extra`'s start.
    fn load(&self, extra: &Extra) -> Result<(Vec<Source>, Vec<RuleFile>, usize), Error> {
        let mut sources: Vec<(String, String)> = Vec::new();
        let resolved = self.sources();
        let mut keys: Vec<Source> = Vec::new();
        for s in &resolved {
            match s {
                Source::Builtin(_) if extra.no_builtin => continue,
                Source::Builtin(p) => {
                    let text = BUILTIN_RULE_FILES
                        .iter()
                        .chain(TARGET_RULE_FILES)
                        .find(|(q, _)| q == p)
                        .map(|(_, t)| *t);
                    sources.push((p.to_string(), text.unwrap_or_default().to_string()));
                }
                Source::File(f) => {
                    sources.push((f.display().to_string(), crate::rules::read_rule_file(f)?));
                }
            }
            keys.push(s.clone());
        }
        let extra_start = sources.len();
        sources.extend(extra.texts.iter().cloned());
        let files = crate::rules::parse_all(&sources)?;
        Ok((keys, files, extra_start))
    }

    /// A one-paragraph description for `onnx-opt pipelines`.
    pub fn describe(&self) -> String {
        let mut s = format!("{}: {}\n", self.name, self.description);
        s.push_str(&format!(
            "  cost {}, fold {}{}\n",
            cost_name::name(self.cost),
            if self.fold { "on" } else { "off" },
            if self.fold_unbounded {
                " (unbounded)"
            } else {
                ""
            }
        ));
        let passes: Vec<String> = self
            .pass_list()
            .iter()
            .map(|p| match &p.if_changed {
                Some(before) => format!("{} (if {before} changed the model)", p.name),
                None => p.name.clone(),
            })
            .collect();
        s.push_str(&format!("  passes: {}\n", passes.join(", ")));
        for ph in &self.phases {
            s.push_str(&format!(
                "  phase {}{}: rules {}{}; limits {} iterations, {} e-nodes, {} s\n",
                ph.name,
                match ph.lowering {
                    Some(c) => format!(" (lowering, in `lower`, cost {})", cost_name::name(c)),
                    None => String::new(),
                },
                ph.rules.join(", "),
                if ph.labels.is_empty() {
                    String::new()
                } else {
                    format!(" labelled {}", ph.labels.join(" or "))
                },
                ph.iterations,
                ph.enodes,
                ph.seconds
            ));
        }
        s
    }
}

/// Rules added to every phase of a pipeline (what `--rules`, `--no-builtin-rules` and
/// `--unsafe-rules` ask for).
#[derive(Debug, Clone, Default)]
pub struct Extra {
    /// Leave out the built-in rule files the pipeline names.
    pub no_builtin: bool,
    /// Rule texts: (origin for errors, text).
    pub texts: Vec<(String, String)>,
    /// Run rules tagged `unsafe` too.
    pub float_unsafe: bool,
    /// Rules written in Rust.
    pub rust: Vec<crate::RustRule>,
}

#[derive(Debug, Clone, PartialEq)]
enum Source {
    Builtin(&'static str),
    File(PathBuf),
}

/// Checks the left sides of Rust rules (names unique across every loaded rule); every error of
/// every rule is reported at once.
fn parse_rust_rules<'r>(
    rules: &'r [crate::RustRule],
    files: &[RuleFile],
) -> Result<Vec<(onnx_rules::ir::Rule, &'r crate::RustRule)>, Error> {
    let mut taken: std::collections::BTreeSet<String> = files
        .iter()
        .flat_map(|f| f.rules.iter().map(|r| r.name.clone()))
        .collect();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for r in rules {
        let options = onnx_rules::CheckOptions {
            taken_names: taken.clone(),
            ..Default::default()
        };
        match onnx_rules::parse_extern_rule(&r.name, &r.pattern, &r.tags, &options) {
            Ok(rule) => {
                taken.insert(r.name.clone());
                out.push((rule, r));
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(Error::Rules(errors))
    }
}

fn stem_of(path: &str) -> &str {
    Path::new(path)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(path)
}

fn builtin_file(stem: &str) -> Option<&'static str> {
    BUILTIN_RULE_FILES
        .iter()
        .chain(TARGET_RULE_FILES)
        .map(|(p, _)| *p)
        .find(|p| stem_of(p) == stem)
}

fn add_labelled(set: &mut RuleSet, file: &RuleFile, labels: &[String]) {
    for rule in &file.rules {
        if labels.is_empty() || rule.tags.labels.iter().any(|l| labels.contains(l)) {
            set.add_rule(rule.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_pipeline_parses_and_builds_its_phases() {
        for (name, _) in BUILTIN_PIPELINES {
            let p = Pipeline::builtin(name).unwrap();
            assert!(!p.description.is_empty(), "{name} has no description");
            let phases = p.phases(&Extra::default()).unwrap();
            assert_eq!(phases.len(), p.phases.len());
            assert!(phases.iter().all(|ph| !ph.rules.is_empty()), "{name}");
            assert_eq!(phases.is_empty(), *name == "convert", "{name}");
        }
    }

    #[test]
    fn labels_select_rules() {
        let p = Pipeline::parse(
            "description = \"x\"\n[[phase]]\nname = \"c\"\nrules = [\"builtin\"]\nlabels = [\"cleanup\"]\n",
            "t",
        )
        .unwrap();
        let phases = p.phases(&Extra::default()).unwrap();
        let rules: Vec<&str> = phases[0].rules.rules().map(|r| r.name.as_str()).collect();
        assert!(rules.contains(&"identity_elim"));
        assert!(!rules.contains(&"fold_bn_into_conv"));
    }

    #[test]
    fn bad_pipelines_are_refused_with_their_origin() {
        let e = Pipeline::parse("[[phase]]\nname = \"a\"\nrules = []\n", "p.toml").unwrap_err();
        assert!(e.to_string().contains("p.toml") && e.to_string().contains("names no rules"));
        let e = Pipeline::parse(
            "[[phase]]\nname = \"a\"\nrules = [\"builtin:nope\"]\n",
            "p.toml",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("no built-in rule file 'nope'"),
            "{e}"
        );
        let e = Pipeline::parse("colour = 3\n", "p.toml").unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
        let e = Pipeline::builtin("nope").unwrap_err();
        assert!(e.to_string().contains("default"), "{e}");
    }
}
