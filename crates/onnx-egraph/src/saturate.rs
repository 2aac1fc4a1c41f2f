//! Saturation in phases: each phase runs its rule group (DSL rules of a [`RuleSet`] and raw egg
//! rewrites, the escape hatch) with iteration, node and time limits; the report says which limit
//! (or saturation) ended it, with e-graph sizes, time, firings per rule and refused unions
//! (rules written in Rust are counted alike, and their declined matches too).
//!
//! The loop is egg's (search every rule on the clean e-graph, then apply, then rebuild), written
//! here so that DSL rules can refuse unsound unions, count their firings, and so that the rule
//! that caused a type conflict is named.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use egg::Rewrite;

use crate::analysis::{OnnxAnalysis, OnnxEGraph, Refusal};
use crate::lang::ONode;
use crate::rules::{Applied, RuleSet, SearchCtx};
use crate::EGraphError;

/// One group of rules run to a limit.
#[derive(Clone)]
pub struct Phase {
    pub name: String,
    /// Rules of the DSL (compiled at each graph's opset).
    pub rules: Arc<RuleSet>,
    /// Raw egg rewrites.
    pub rewrites: Vec<Rewrite<ONode, OnnxAnalysis>>,
    pub iter_limit: usize,
    pub node_limit: usize,
    pub time_limit: Duration,
    /// Matches of one rule applied per iteration, at most.
    pub match_limit: usize,
    /// The default-domain opset a conversion goes to: version steps run only toward it (and
    /// not at all when it is `None`).
    pub target_opset: Option<i64>,
    /// A lowering phase: it runs after the other phases' extraction, in an e-graph of its own
    /// over the extracted model, and that e-graph is extracted under `lowering`'s cost model
    /// (rewrites into one runtime's own ops, which must not compete with the unfused forms).
    pub lowering: Option<crate::CostKind>,
}

impl Phase {
    /// A phase of DSL rules with default limits (30 iterations, 200k e-nodes, 20 s).
    pub fn new(name: &str, rules: Arc<RuleSet>) -> Self {
        Phase {
            name: name.to_string(),
            rules,
            rewrites: Vec::new(),
            iter_limit: 30,
            node_limit: 200_000,
            time_limit: Duration::from_secs(20),
            match_limit: 10_000,
            target_opset: None,
            lowering: None,
        }
    }
    /// A phase of raw egg rewrites.
    pub fn with_rewrites(name: &str, rewrites: Vec<Rewrite<ONode, OnnxAnalysis>>) -> Self {
        let mut p = Phase::new(name, Arc::new(RuleSet::new()));
        p.rewrites = rewrites;
        p
    }
}

/// What ended a phase.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum PhaseStop {
    Saturated,
    IterationLimit(usize),
    NodeLimit(usize),
    TimeLimit(f64),
    /// The phase had no rules (at this opset).
    NoRules,
}

/// Figures of one phase.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PhaseReport {
    pub name: String,
    pub stop: PhaseStop,
    pub iterations: usize,
    pub enodes: usize,
    pub eclasses: usize,
    pub seconds: f64,
    /// Unions made per rule (a rule that only rediscovers known equalities is not counted).
    pub firings: BTreeMap<String, usize>,
    /// Unions refused (different types or constants), with the rule that asked.
    pub refusals: Vec<Refusal>,
    /// Matches whose right side could not be built (an attribute value out of range, a
    /// literal whose type cannot be told), per rule: the rule matched but did nothing.
    pub not_built: BTreeMap<String, usize>,
    /// The first reason a rule's right side could not be built, per rule.
    pub not_built_reasons: BTreeMap<String, String>,
    /// Matches a Rust applier declined (returned `Ok(None)`), per rule.
    pub declined: BTreeMap<String, usize>,
}

/// Runs the phases in order on the e-graph, returning it with one report per phase.
/// `uses` are the consumers per class of the graph as lifted (for `single_use`).
pub fn saturate(
    mut egraph: OnnxEGraph,
    phases: &[Phase],
    uses: &[(egg::Id, usize)],
) -> Result<(OnnxEGraph, Vec<PhaseReport>), EGraphError> {
    let mut reports = Vec::new();
    let opset = egraph.analysis.opsets.get("").copied().unwrap_or(0);
    for phase in phases {
        let start = Instant::now();
        let active = phase.rules.active(opset, phase.target_opset);
        let mut report = PhaseReport {
            name: phase.name.clone(),
            stop: PhaseStop::NoRules,
            iterations: 0,
            enodes: 0,
            eclasses: 0,
            seconds: 0.0,
            firings: BTreeMap::new(),
            refusals: Vec::new(),
            not_built: BTreeMap::new(),
            not_built_reasons: BTreeMap::new(),
            declined: BTreeMap::new(),
        };
        if !active.is_empty() || !phase.rewrites.is_empty() {
            report.stop = run_phase(&mut egraph, phase, &active, opset, uses, start, &mut report)?;
        }
        report.enodes = egraph.total_number_of_nodes();
        report.eclasses = egraph.number_of_classes();
        report.seconds = start.elapsed().as_secs_f64();
        reports.push(report);
    }
    Ok((egraph, reports))
}

fn run_phase(
    egraph: &mut OnnxEGraph,
    phase: &Phase,
    active: &[crate::rules::RuleEntry],
    opset: i64,
    uses: &[(egg::Id, usize)],
    start: Instant,
    report: &mut PhaseReport,
) -> Result<PhaseStop, EGraphError> {
    // A site refused once is reported once, however often the rule matches it again.
    let mut refused: std::collections::BTreeSet<(String, Vec<egg::Id>)> = Default::default();
    // Matches already applied, by rule and canonical ids: applying one again would rebuild the
    // same right side (hash-consing) and change nothing.
    let mut applied: std::collections::HashSet<(usize, Vec<u32>)> = Default::default();
    for iteration in 0..phase.iter_limit {
        report.iterations = iteration + 1;
        egraph.rebuild();
        let use_map = crate::rules::use_counts(egraph, uses);
        // Search every rule on the clean e-graph.
        let dsl_matches: Vec<_> = {
            let ctx = SearchCtx {
                eg: egraph,
                opset,
                uses: &use_map,
                guards: &phase.rules.guards,
            };
            active
                .iter()
                .map(|r| crate::rules::search(&ctx, r, phase.match_limit))
                .collect()
        };
        let egg_matches: Vec<_> = phase
            .rewrites
            .iter()
            .map(|r| r.search_with_limit(egraph, phase.match_limit))
            .collect();
        let nodes_before = egraph.total_number_of_nodes();
        let mut changed = false;
        egraph.analysis.rules_this_iteration.clear();
        for (ri, (entry, matches)) in active.iter().zip(&dsl_matches).enumerate() {
            let rule = &entry.rule;
            egraph.analysis.current_rule = Some(rule.name.clone());
            let mut fired = 0usize;
            for m in matches {
                if !applied.insert((ri, m.key(egraph))) {
                    continue;
                }
                match crate::rules::apply(egraph, entry, m, opset, &use_map, &phase.rules.guards) {
                    Applied::Changed => fired += 1,
                    Applied::Unchanged => {}
                    Applied::Declined => {
                        *report.declined.entry(rule.name.clone()).or_insert(0) += 1;
                    }
                    Applied::NotBuilt(reason) => {
                        *report.not_built.entry(rule.name.clone()).or_insert(0) += 1;
                        report
                            .not_built_reasons
                            .entry(rule.name.clone())
                            .or_insert(reason);
                    }
                    Applied::Refused(reason) => {
                        let roots = m.roots.iter().map(|&c| egraph.find(c)).collect();
                        if !refused.insert((rule.name.clone(), roots)) {
                            continue;
                        }
                        let site = m.roots.first().map_or(String::new(), |&c| {
                            let c = egraph.find(c);
                            egraph[c]
                                .data
                                .names
                                .iter()
                                .next()
                                .cloned()
                                .unwrap_or_else(|| format!("class {c}"))
                        });
                        let r = Refusal {
                            rule: rule.name.clone(),
                            site,
                            reason,
                        };
                        egraph.analysis.refusals.push(r.clone());
                        report.refusals.push(r);
                    }
                }
            }
            egraph.analysis.current_rule = None;
            if fired > 0 {
                *report.firings.entry(rule.name.clone()).or_insert(0) += fired;
                egraph.analysis.rules_this_iteration.push(rule.name.clone());
                changed = true;
            }
        }
        for (rw, matches) in phase.rewrites.iter().zip(egg_matches) {
            let name = rw.name.to_string();
            egraph.analysis.current_rule = Some(name.clone());
            let ids = rw.apply(egraph, &matches);
            egraph.analysis.current_rule = None;
            if !ids.is_empty() {
                *report.firings.entry(name.clone()).or_insert(0) += ids.len();
                egraph.analysis.rules_this_iteration.push(name);
                changed = true;
            }
        }
        egraph.rebuild();
        egraph.analysis.rules_this_iteration.clear();
        if let Some(c) = egraph.analysis.conflicts.first() {
            return Err(EGraphError::UnsoundMerge {
                phase: phase.name.clone(),
                cause: c.cause.to_string(),
                left: c.left.clone(),
                right: c.right.clone(),
            });
        }
        if !changed && egraph.total_number_of_nodes() == nodes_before {
            return Ok(PhaseStop::Saturated);
        }
        if egraph.total_number_of_nodes() > phase.node_limit {
            return Ok(PhaseStop::NodeLimit(egraph.total_number_of_nodes()));
        }
        if start.elapsed() > phase.time_limit {
            return Ok(PhaseStop::TimeLimit(start.elapsed().as_secs_f64()));
        }
    }
    Ok(PhaseStop::IterationLimit(phase.iter_limit))
}
