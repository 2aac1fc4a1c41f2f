//! Saturation in phases: each phase runs its rule group with iteration, node and time limits,
//! and the report says which limit (or saturation) ended it, with e-graph sizes and time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use egg::{
    Applier, Id, PatternAst, Rewrite, Runner, SearchMatches, Searcher, StopReason, Subst, Symbol,
    Var,
};

use crate::analysis::{OnnxAnalysis, OnnxEGraph};
use crate::lang::ONode;
use crate::EGraphError;

/// One group of rules run to a limit.
pub struct Phase {
    pub name: String,
    pub rules: Vec<Rewrite<ONode, OnnxAnalysis>>,
    pub iter_limit: usize,
    pub node_limit: usize,
    pub time_limit: Duration,
}

/// What ended a phase.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum PhaseStop {
    Saturated,
    IterationLimit(usize),
    NodeLimit(usize),
    TimeLimit(f64),
    /// The phase had no rules.
    NoRules,
    Other(String),
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
}

/// Runs the phases in order on the e-graph, returning it with one report per phase.
pub fn saturate(
    mut egraph: OnnxEGraph,
    phases: &[Phase],
) -> Result<(OnnxEGraph, Vec<PhaseReport>), EGraphError> {
    let mut reports = Vec::new();
    for phase in phases {
        let start = Instant::now();
        if phase.rules.is_empty() {
            reports.push(PhaseReport {
                name: phase.name.clone(),
                stop: PhaseStop::NoRules,
                iterations: 0,
                enodes: egraph.total_number_of_nodes(),
                eclasses: egraph.number_of_classes(),
                seconds: 0.0,
            });
            continue;
        }
        let rules: Vec<Rewrite<ONode, OnnxAnalysis>> = phase
            .rules
            .iter()
            .map(attributed)
            .collect::<Result<_, _>>()?;
        let runner = Runner::default()
            .with_egraph(egraph)
            .with_iter_limit(phase.iter_limit)
            .with_node_limit(phase.node_limit)
            .with_time_limit(phase.time_limit)
            .with_hook(|runner| {
                if runner.egraph.analysis.conflicts.is_empty() {
                    runner.egraph.analysis.rules_this_iteration.clear();
                    Ok(())
                } else {
                    Err("a merge found conflicting types".into())
                }
            })
            .run(&rules);
        let stop = match &runner.stop_reason {
            Some(StopReason::Saturated) => PhaseStop::Saturated,
            Some(StopReason::IterationLimit(n)) => PhaseStop::IterationLimit(*n),
            Some(StopReason::NodeLimit(n)) => PhaseStop::NodeLimit(*n),
            Some(StopReason::TimeLimit(t)) => PhaseStop::TimeLimit(*t),
            Some(StopReason::Other(s)) => PhaseStop::Other(s.clone()),
            None => PhaseStop::Other("unknown".into()),
        };
        let iterations = runner.iterations.len();
        egraph = runner.egraph;
        egraph.analysis.rules_this_iteration.clear();
        if let Some(c) = egraph.analysis.conflicts.first() {
            return Err(EGraphError::UnsoundMerge {
                phase: phase.name.clone(),
                cause: c.cause.to_string(),
                left: c.left.clone(),
                right: c.right.clone(),
            });
        }
        reports.push(PhaseReport {
            name: phase.name.clone(),
            stop,
            iterations,
            enodes: egraph.total_number_of_nodes(),
            eclasses: egraph.number_of_classes(),
            seconds: start.elapsed().as_secs_f64(),
        });
    }
    Ok((egraph, reports))
}

/// The rule with its applier wrapped so that merges it causes are attributed to it.
fn attributed(
    rule: &Rewrite<ONode, OnnxAnalysis>,
) -> Result<Rewrite<ONode, OnnxAnalysis>, EGraphError> {
    Rewrite::new(
        rule.name,
        Shared(rule.searcher.clone()),
        Attributed {
            inner: rule.applier.clone(),
        },
    )
    .map_err(|e| EGraphError::Internal(format!("rule '{}': {e}", rule.name)))
}

/// A searcher shared with the original rule.
struct Shared(Arc<dyn Searcher<ONode, OnnxAnalysis> + Sync + Send>);

impl Searcher<ONode, OnnxAnalysis> for Shared {
    fn search_eclass_with_limit(
        &self,
        egraph: &OnnxEGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, ONode>> {
        self.0.search_eclass_with_limit(egraph, eclass, limit)
    }

    fn search_with_limit(
        &self,
        egraph: &OnnxEGraph,
        limit: usize,
    ) -> Vec<SearchMatches<'_, ONode>> {
        self.0.search_with_limit(egraph, limit)
    }

    fn get_pattern_ast(&self) -> Option<&PatternAst<ONode>> {
        self.0.get_pattern_ast()
    }

    fn vars(&self) -> Vec<Var> {
        self.0.vars()
    }
}

/// An applier that records, in the analysis, which rule is applying (for conflict reports) and
/// which rules changed the e-graph this iteration (for conflicts found by congruence).
struct Attributed {
    inner: Arc<dyn Applier<ONode, OnnxAnalysis> + Sync + Send>,
}

impl Applier<ONode, OnnxAnalysis> for Attributed {
    fn apply_matches(
        &self,
        egraph: &mut OnnxEGraph,
        matches: &[SearchMatches<ONode>],
        rule_name: Symbol,
    ) -> Vec<Id> {
        egraph.analysis.current_rule = Some(rule_name.to_string());
        let changed = self.inner.apply_matches(egraph, matches, rule_name);
        egraph.analysis.current_rule = None;
        if !changed.is_empty() {
            let name = rule_name.to_string();
            if !egraph.analysis.rules_this_iteration.contains(&name) {
                egraph.analysis.rules_this_iteration.push(name);
            }
        }
        changed
    }

    fn apply_one(
        &self,
        egraph: &mut OnnxEGraph,
        eclass: Id,
        subst: &Subst,
        searcher_ast: Option<&PatternAst<ONode>>,
        rule_name: Symbol,
    ) -> Vec<Id> {
        self.inner
            .apply_one(egraph, eclass, subst, searcher_ast, rule_name)
    }

    fn get_pattern_ast(&self) -> Option<&PatternAst<ONode>> {
        self.inner.get_pattern_ast()
    }

    fn vars(&self) -> Vec<Var> {
        self.inner.vars()
    }
}
