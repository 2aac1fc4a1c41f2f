//! The whole e-graph path for a model: lift -> fold (in the analysis) -> saturate -> extract ->
//! emit -> check. Subgraphs (If/Loop/Scan bodies) are optimized first, recursively, each in its
//! own e-graph whose outer-scope values are `Input` leaves.

use std::collections::BTreeMap;
use std::time::Instant;

use onnx_ir::{Graph, Model};

use crate::analysis::FoldOptions;
use crate::emit::{emit_graph, EmitOptions};
use crate::extract::{extract_dag_keeping, AtOpset, Latency, NodeCount, OnnxRuntime};
use crate::lang::NodeKind;
use crate::lift::{lift_graph_in_scope, Lifted};
use crate::saturate::{saturate, Phase, PhaseReport};
use crate::EGraphError;

/// Which cost model extraction uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum CostKind {
    /// Estimated latency from shapes.
    #[default]
    Latency,
    /// Plain node count.
    NodeCount,
    /// Estimated latency where onnxruntime runs a fused contrib kernel: `Latency`, with the
    /// standard ops a `com.microsoft` op replaces priced high (Attention, RMSNormalization,
    /// LayerNormalization, Gelu: 1000 more), so a class
    /// that holds both keeps the contrib op. For the extraction after a lowering phase, whose
    /// e-graph holds the model as extracted and the target rules' rewrites of it.
    OnnxRuntime,
}

/// Options of [`rewrite_model`].
#[derive(Default)]
pub struct RewriteOptions {
    pub fold: FoldOptions,
    pub cost: CostKind,
    /// Rule phases, run in order on every graph.
    pub phases: Vec<Phase>,
    /// Extract only operators legal at this default-domain opset (infinite cost otherwise).
    pub target_opset: Option<i64>,
}

/// Figures of one optimized graph.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GraphReport {
    pub nodes_before: usize,
    pub nodes_after: usize,
    pub eclasses: usize,
    pub enodes: usize,
    pub constants: usize,
    pub phases: Vec<PhaseReport>,
    /// Folds skipped because the result would have been larger than the budget.
    pub folds_over_budget: usize,
    /// Folds the kernels refused (op, message); the nodes stay.
    pub fold_failures: Vec<(String, String)>,
    pub extraction_cost: f64,
    /// The cost model's latency estimate of the graph's operators as given (every node, folded
    /// ones too) and as extracted (constants not counted).
    pub estimate_before: f64,
    pub estimate_after: f64,
    pub lift_seconds: f64,
    pub saturate_seconds: f64,
    pub extract_seconds: f64,
}

/// What [`rewrite_model`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RewriteReport {
    pub main: GraphReport,
    /// Subgraphs optimized (If/Loop/Scan bodies at any depth).
    pub subgraphs: usize,
    /// Firings per rule inside subgraphs, summed over all of them and their phases.
    pub subgraph_firings: BTreeMap<String, usize>,
    /// Unions refused inside subgraphs.
    pub subgraph_refusals: Vec<crate::Refusal>,
}

/// What the subgraphs of a model added up to.
#[derive(Default)]
struct SubgraphTotals {
    count: usize,
    firings: BTreeMap<String, usize>,
    refusals: Vec<crate::Refusal>,
}

/// Optimizes a model's main graph and its subgraphs. The result passes the checker or this
/// returns an error.
pub fn rewrite_model(
    model: &Model,
    options: RewriteOptions,
) -> Result<(Model, RewriteReport), EGraphError> {
    let opsets = crate::lift::opset_map(model);
    let ir_version = match options.target_opset {
        Some(t) => ir_version_at(model, &opsets, t)?,
        None => model.ir_version,
    };
    let mut subgraphs = SubgraphTotals::default();
    let (graph, main) = rewrite_graph(
        &model.graph,
        &opsets,
        &options,
        Scope {
            below_ir4: ir_version.unwrap_or(0) < 4,
            subgraph: false,
            outer: &Default::default(),
            outer_types: &Default::default(),
        },
        &mut subgraphs,
    )?;
    let mut out = model.clone();
    out.graph = graph;
    out.ir_version = ir_version;
    follow_extracted_opsets(&mut out, options.target_opset);
    if let Err(errors) = onnx_ir::check_model(&out) {
        let msgs: Vec<String> = errors.iter().take(5).map(|e| e.to_string()).collect();
        return Err(EGraphError::Check(msgs.join("; ")));
    }
    Ok((
        out,
        RewriteReport {
            main,
            subgraphs: subgraphs.count,
            subgraph_firings: subgraphs.firings,
            subgraph_refusals: subgraphs.refusals,
        },
    ))
}

/// The emitted model's opset imports follow what was extracted: a domain that extraction
/// introduced (a rule built an op of it) is imported ([`import_used_domains`]), and a target
/// opset sets the default domain's version.
fn follow_extracted_opsets(model: &mut Model, target: Option<i64>) {
    import_used_domains(model);
    if let Some(t) = target {
        for o in model.opset_imports.iter_mut() {
            if onnx_schema::normalize_domain(&o.domain).is_empty() {
                o.version = t;
            }
        }
    }
}

/// Imports every domain a node of the model (or of a subgraph) uses and the model does not
/// import, at the newest version the schemas know: the version a rule's right side builds an op
/// of a domain new to the model at.
pub fn import_used_domains(model: &mut Model) {
    let mut used = std::collections::BTreeSet::new();
    collect_domains(&model.graph, &mut used);
    for d in used {
        let imported = model
            .opset_imports
            .iter()
            .any(|o| onnx_schema::normalize_domain(&o.domain) == d);
        if !imported {
            if let Some(v) = onnx_schema::registry().max_opset(&d) {
                model
                    .opset_imports
                    .push(onnx_ir::OpsetImport::new(d.as_str(), v));
            }
        }
    }
}

fn collect_domains(g: &Graph, out: &mut std::collections::BTreeSet<String>) {
    for n in g.nodes.iter() {
        out.insert(onnx_schema::normalize_domain(&n.domain).to_string());
        for a in n.attributes.iter() {
            for sub in a.value.subgraphs() {
                collect_domains(sub, out);
            }
        }
    }
}

/// Where a graph sits: the model's IR rules and the names of its enclosing scopes.
#[derive(Clone, Copy)]
struct Scope<'a> {
    /// The model's IR version is below 4 (initializers are graph inputs).
    below_ir4: bool,
    /// The graph is a subgraph (an attribute of a node).
    subgraph: bool,
    /// Every name of the enclosing scopes.
    outer: &'a std::collections::BTreeSet<String>,
    /// The types of the enclosing scopes' values, where known.
    outer_types: &'a BTreeMap<String, onnx_proto::TypeProto>,
}

/// The types a subgraph of `graph` may read from its enclosing scopes: `outer`, then the
/// values of `graph` (declared, or inferred where inference gets through the graph).
fn scope_types(
    graph: &Graph,
    opsets: &BTreeMap<String, i64>,
    outer: &BTreeMap<String, onnx_proto::TypeProto>,
) -> BTreeMap<String, onnx_proto::TypeProto> {
    let mut types = outer.clone();
    for v in &graph.values {
        if let Some(t) = &v.ty {
            types.insert(v.name.to_string(), t.clone());
        }
    }
    if let Ok(inferred) = onnx_schema::infer::infer_graph(&graph.to_proto(), opsets) {
        for (name, t) in inferred {
            types.entry(name).or_insert(t);
        }
    }
    types
}

/// A scalar tensor type of an element type.
fn scalar_type(elem: i32) -> onnx_proto::TypeProto {
    use onnx_proto::type_proto::{Tensor, Value};
    onnx_proto::TypeProto {
        value: Some(Value::TensorType(Tensor {
            elem_type: Some(elem),
            shape: Some(Default::default()),
        })),
        ..Default::default()
    }
}

/// A tensor type with its element type only (a Loop's carried value may change shape).
fn element_type_only(t: &onnx_proto::TypeProto) -> Option<onnx_proto::TypeProto> {
    use onnx_proto::type_proto::{Tensor, Value};
    match &t.value {
        Some(Value::TensorType(x)) => Some(onnx_proto::TypeProto {
            value: Some(Value::TensorType(Tensor {
                elem_type: x.elem_type,
                shape: None,
            })),
            ..Default::default()
        }),
        _ => None,
    }
}

/// Every value name of a graph and of the subgraphs inside it.
fn names_within(g: &Graph, out: &mut std::collections::BTreeSet<String>) {
    out.extend(g.values.iter().map(|v| v.name.to_string()));
    for node in &g.nodes {
        for sub in node.subgraphs() {
            names_within(sub, out);
        }
    }
}

/// Optimizes one graph (its subgraphs first).
fn rewrite_graph(
    graph: &Graph,
    opsets: &BTreeMap<String, i64>,
    options: &RewriteOptions,
    scope: Scope<'_>,
    subgraphs: &mut SubgraphTotals,
) -> Result<(Graph, GraphReport), EGraphError> {
    let mut graph_with_subs;
    let mut source = graph;
    // Fresh names may repeat no name of an enclosing scope, nor one inside a subgraph.
    let mut reserved = scope.outer.clone();
    if graph.nodes.iter().any(|n| n.subgraphs().next().is_some()) {
        let mut inner_outer = scope.outer.clone();
        inner_outer.extend(graph.values.iter().map(|v| v.name.to_string()));
        let inner_types = scope_types(graph, opsets, scope.outer_types);
        let inner = Scope {
            below_ir4: scope.below_ir4,
            subgraph: true,
            outer: &inner_outer,
            outer_types: &inner_types,
        };
        graph_with_subs = graph.clone();
        let value_names: Vec<String> = graph.values.iter().map(|v| v.name.to_string()).collect();
        for node in graph_with_subs.nodes.iter_mut() {
            // A Loop or Scan body's inputs left untyped take the element types the node gives
            // them (a Loop's iteration count and condition, then its carried values; a Scan's
            // states and scan inputs) while the body is optimized, and are written back
            // untyped.
            let element_types = |skip: usize| -> Vec<Option<onnx_proto::TypeProto>> {
                node.inputs
                    .iter()
                    .skip(skip)
                    .map(|i| {
                        i.and_then(|id| value_names.get(id.index()))
                            .and_then(|n| inner_types.get(n))
                            .and_then(element_type_only)
                    })
                    .collect()
            };
            let default_domain = node.domain.is_empty() || node.domain.as_str() == "ai.onnx";
            let loop_inputs: Vec<Option<onnx_proto::TypeProto>> = match node.op_type.as_str() {
                "Loop" if default_domain => {
                    let mut v = vec![Some(scalar_type(7)), Some(scalar_type(9))];
                    v.extend(element_types(2));
                    v
                }
                // Scan-8's first input is sequence_lens, which the body does not see.
                "Scan" if default_domain => {
                    element_types(usize::from(opsets.get("").is_some_and(|&o| o < 9)))
                }
                _ => Vec::new(),
            };
            for attr in node.attributes.iter_mut() {
                let is_body = attr.name.as_str() == "body";
                for sub in attr.value.subgraphs_mut() {
                    let mut filled = Vec::new();
                    if is_body {
                        for (k, &id) in sub.inputs.clone().iter().enumerate() {
                            let v = sub.value_mut(id);
                            if let (None, Some(Some(t))) = (&v.ty, loop_inputs.get(k)) {
                                v.ty = Some(t.clone());
                                filled.push(k);
                            }
                        }
                    }
                    let (mut g, report) = rewrite_graph(sub, opsets, options, inner, subgraphs)?;
                    for k in filled {
                        if let Some(&id) = g.inputs.get(k) {
                            g.value_mut(id).ty = None;
                        }
                    }
                    names_within(&g, &mut reserved);
                    *sub = g;
                    subgraphs.count += 1;
                    for p in report.phases {
                        for (rule, n) in p.firings {
                            *subgraphs.firings.entry(rule).or_default() += n;
                        }
                        subgraphs.refusals.extend(p.refusals);
                    }
                }
            }
        }
        source = &graph_with_subs;
    }
    let t0 = Instant::now();
    let mut lifted = lift_graph_in_scope(source, opsets, options.fold.clone(), scope.outer_types)?;
    let lift_seconds = t0.elapsed().as_secs_f64();
    let estimate_before = crate::cost::estimate(
        &lifted.egraph,
        lifted
            .origins
            .iter()
            .filter_map(|o| Some((lifted.egraph.lookup(o.enode.clone())?, &o.enode))),
    );
    let t1 = Instant::now();
    let egraph = std::mem::take(&mut lifted.egraph);
    let (egraph, phases) = saturate(egraph, &options.phases, &lifted.uses)?;
    lifted.egraph = egraph;
    let saturate_seconds = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    if let Some(target) = options.target_opset {
        let sets: Vec<&crate::RuleSet> = options.phases.iter().map(|p| &*p.rules).collect();
        let stepped = crate::convert::ops_with_steps(&sets);
        if crate::convert::rebind_to_opset(&mut lifted.egraph, target, &stepped) > 0 {
            lifted.egraph.rebuild();
        }
        let stuck = not_expressible(&lifted, source, target);
        if !stuck.is_empty() {
            return Err(EGraphError::NotExpressible {
                target,
                nodes: stuck,
            });
        }
    }
    // The input's own nodes, by class: extraction keeps their form on a tie.
    let original: std::collections::BTreeSet<(egg::Id, NodeKind)> = lifted
        .origins
        .iter()
        .filter_map(|o| {
            let c = lifted.egraph.lookup(o.enode.clone())?;
            Some((lifted.egraph.find(c), o.enode.kind))
        })
        .collect();
    let (eg, root) = (&lifted.egraph, lifted.root);
    let sel = match (options.cost, options.target_opset) {
        (CostKind::Latency, None) => extract_dag_keeping(eg, root, &Latency, &original)?,
        (CostKind::NodeCount, None) => extract_dag_keeping(eg, root, &NodeCount, &original)?,
        (CostKind::OnnxRuntime, None) => extract_dag_keeping(eg, root, &OnnxRuntime, &original)?,
        (CostKind::OnnxRuntime, Some(target)) => extract_dag_keeping(
            eg,
            root,
            &AtOpset {
                inner: OnnxRuntime,
                target,
            },
            &original,
        )?,
        (CostKind::Latency, Some(target)) => extract_dag_keeping(
            eg,
            root,
            &AtOpset {
                inner: Latency,
                target,
            },
            &original,
        )?,
        (CostKind::NodeCount, Some(target)) => extract_dag_keeping(
            eg,
            root,
            &AtOpset {
                inner: NodeCount,
                target,
            },
            &original,
        )?,
    };
    let out = emit_graph(
        &lifted,
        source,
        &sel,
        EmitOptions {
            initializers_are_inputs: scope.below_ir4 && !scope.subgraph,
            constants_as_nodes: scope.below_ir4 && scope.subgraph,
            reserved,
        },
    )?;
    let extract_seconds = t2.elapsed().as_secs_f64();
    let a = &lifted.egraph.analysis;
    let report = GraphReport {
        nodes_before: graph.order.len(),
        nodes_after: out.order.len(),
        eclasses: lifted.egraph.number_of_classes(),
        enodes: lifted.egraph.total_number_of_nodes(),
        constants: a.consts.len(),
        phases,
        folds_over_budget: a.over_budget,
        fold_failures: a.fold_failures.clone(),
        extraction_cost: sel.cost,
        estimate_before,
        estimate_after: crate::cost::estimate(
            &lifted.egraph,
            sel.choice.iter().map(|(c, n)| (*c, n)),
        ),
        lift_seconds,
        saturate_seconds,
        extract_seconds,
    };
    Ok((out, report))
}

/// The input nodes whose value has no e-node legal at `target`: nothing equivalent can be
/// written there. (A class folded to a constant is always expressible.)
fn not_expressible(lifted: &Lifted, graph: &Graph, target: i64) -> Vec<String> {
    use egg::Language as _;
    let eg = &lifted.egraph;
    // A class is expressible when one of its nodes is legal at the target and reads only
    // expressible classes (a legal node over an illegal child does not help).
    let mut expressible: std::collections::BTreeSet<egg::Id> = Default::default();
    loop {
        let before = expressible.len();
        for c in eg.classes() {
            if !expressible.contains(&c.id)
                && c.nodes.iter().any(|n| {
                    crate::extract::legal_at(eg, n, target)
                        && n.children()
                            .iter()
                            .all(|k| expressible.contains(&eg.find(*k)))
                })
            {
                expressible.insert(c.id);
            }
        }
        if expressible.len() == before {
            break;
        }
    }
    let root_ok = expressible.contains(&eg.find(lifted.root));
    // Precise first; if that names nothing while the outputs are stuck (a legal node that only
    // loops back, such as an Identity merged with its input), every stuck node.
    for precise in [true, false] {
        let out = stuck_nodes(lifted, graph, target, &expressible, precise);
        if !out.is_empty() || root_ok {
            return out;
        }
    }
    Vec::new()
}

fn stuck_nodes(
    lifted: &Lifted,
    graph: &Graph,
    target: i64,
    expressible: &std::collections::BTreeSet<egg::Id>,
    precise: bool,
) -> Vec<String> {
    use egg::Language as _;
    let eg = &lifted.egraph;
    let mut out = Vec::new();
    for origin in &lifted.origins {
        let Some(class) = eg.lookup(origin.enode.clone()) else {
            continue;
        };
        // Listed: every node that cannot be written at the target itself — its class has no
        // legal node at all (one reading its own class does not count), or it loses
        // expressibility over expressible inputs. A node whose only trouble is an input listed
        // already is not repeated.
        let class = eg.find(class);
        let has_legal = precise
            && (crate::extract::legal_at(eg, &origin.enode, target)
                || eg[class].nodes.iter().any(|n| {
                    crate::extract::legal_at(eg, n, target)
                        && n.children().iter().all(|k| eg.find(*k) != class)
                }));
        let inputs_ok = origin
            .enode
            .children()
            .iter()
            .all(|k| expressible.contains(&eg.find(*k)));
        if expressible.contains(&class)
            || (has_legal && !inputs_ok)
            || (!precise && crate::extract::legal_at(eg, &origin.enode, target))
        {
            continue;
        }
        let node = graph.node(origin.node);
        let NodeKind::Op(op) = origin.enode.kind else {
            continue;
        };
        let info = eg.analysis.ops.get(op);
        // A multi-output node is not needed when every output in use has another expression
        // legal at the target (a rule wrote its first output with other ops).
        if info.is_tuple {
            let outputs: Vec<egg::Id> = (0..info.n_outputs as u32)
                .filter_map(|i| eg.lookup(crate::lang::ONode::new(NodeKind::Out(i), vec![class])))
                .collect();
            if !outputs.is_empty() && outputs.iter().all(|o| expressible.contains(&eg.find(*o))) {
                continue;
            }
        }
        let name = match node.name.as_deref() {
            Some(n) if !n.is_empty() => format!("node '{n}'"),
            _ => match node.outputs.iter().flatten().next() {
                Some(&v) => format!("the node computing '{}'", graph.value(v).name),
                None => "an unnamed node".to_string(),
            },
        };
        let at_target = onnx_schema::registry()
            .lookup(&info.domain, &info.op_type, target)
            .map(|s| format!("opset {target} has version {}", s.since_version))
            .unwrap_or_else(|| format!("opset {target} has no {}", info.op_type));
        out.push(format!(
            "{name} ({}, version {}; {at_target})",
            info.op_type, info.since_version
        ));
    }
    out.sort();
    out.dedup();
    out
}

/// The IR version of a model converted to default-domain opset `target`: the one released with
/// that opset when converting down (a runtime pinned to the opset reads that IR), at least it
/// when converting up. Model-local functions are not converted here (the facade converts their
/// bodies first, or inlines them): a function whose body imports another default-domain opset
/// than the target is refused; with functions, the IR version is not lowered (functions need
/// IR 8, their attribute defaults 9, their value types 10).
fn ir_version_at(
    model: &Model,
    opsets: &BTreeMap<String, i64>,
    target: i64,
) -> Result<Option<i64>, EGraphError> {
    let source = opsets.get("").copied().unwrap_or(target);
    if source != target {
        for f in &model.functions {
            let v = f
                .opset_imports
                .iter()
                .find(|o| onnx_schema::normalize_domain(&o.domain).is_empty())
                .map(|o| o.version);
            if v.is_some_and(|v| v != target) {
                return Err(EGraphError::Unsupported(format!(
                    "converting a model with model-local functions (opset {source} to {target}): the body of '{}' would keep opset {}",
                    f.name.as_deref().unwrap_or(""),
                    v.unwrap_or(source)
                )));
            }
        }
    }
    let Some(min) = onnx_schema::registry().min_ir_version_for_opset(target) else {
        return Err(EGraphError::Unsupported(format!(
            "opset {target} of the default domain is unknown to this build"
        )));
    };
    let current = model.ir_version.unwrap_or(min);
    Ok(Some(if target < source && model.functions.is_empty() {
        current.min(min)
    } else {
        current.max(min)
    }))
}
