//! Saturation in phases: each phase runs its rule group with iteration, node and time limits,
//! and the report says which limit (or saturation) ended it, with e-graph sizes and time.

use std::time::{Duration, Instant};

use egg::{Rewrite, Runner, StopReason};

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
        let runner = Runner::default()
            .with_egraph(egraph)
            .with_iter_limit(phase.iter_limit)
            .with_node_limit(phase.node_limit)
            .with_time_limit(phase.time_limit)
            .run(&phase.rules);
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
        if let Some(c) = egraph.analysis.conflicts.first() {
            return Err(EGraphError::UnsoundMerge {
                phase: phase.name.clone(),
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
