//! Topological order of a graph's nodes: a stable Kahn order (among the nodes that are ready,
//! the one earliest in the current order goes first, so a sorted graph keeps its order).
//! A node whose subgraphs read a name from this graph depends on that name's producer.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::error::IrError;
use crate::graph::{Graph, NodeId};
use crate::name::Name;

impl Graph {
    /// The nodes of `order` in a topological order; the error names a node on a cycle.
    /// Dependencies through values whose producer is not in `order` are ignored.
    pub fn topological_order(&self) -> Result<Vec<NodeId>, IrError> {
        let preds = self.predecessors()?;
        let count = self.order.len();
        let mut succs: Vec<Vec<usize>> = vec![Vec::new(); count];
        let mut indegree = vec![0usize; count];
        for (pos, list) in preds.iter().enumerate() {
            for &p in list {
                if let Some(s) = succs.get_mut(p) {
                    s.push(pos);
                }
            }
            if let Some(d) = indegree.get_mut(pos) {
                *d = list.len();
            }
        }
        let mut ready: BinaryHeap<Reverse<usize>> = indegree
            .iter()
            .enumerate()
            .filter(|(_, &d)| d == 0)
            .map(|(pos, _)| Reverse(pos))
            .collect();
        let mut sorted = Vec::with_capacity(count);
        let mut done = vec![false; count];
        while let Some(Reverse(pos)) = ready.pop() {
            if let (Some(&id), Some(flag)) = (self.order.get(pos), done.get_mut(pos)) {
                sorted.push(id);
                *flag = true;
            }
            for &s in succs.get(pos).map(Vec::as_slice).unwrap_or(&[]) {
                if let Some(d) = indegree.get_mut(s) {
                    *d = d.saturating_sub(1);
                    if *d == 0 {
                        ready.push(Reverse(s));
                    }
                }
            }
        }
        if sorted.len() == count {
            return Ok(sorted);
        }
        let pos = node_on_cycle(&preds, &done);
        let id = self.order.get(pos).copied().unwrap_or(NodeId(0));
        let node = self.get_node(id);
        Err(IrError::Cycle {
            graph: self.name_or_empty().to_string(),
            node: id,
            index: pos,
            node_name: node.and_then(|n| n.name.clone()).unwrap_or_default(),
            op_type: node.map(|n| n.op_type.clone()).unwrap_or_default(),
        })
    }

    /// Reorders `order` topologically, in this graph and in every subgraph. Returns whether
    /// any order changed. On a cycle nothing is changed in the graph that has it.
    pub fn sort_topologically(&mut self) -> Result<bool, IrError> {
        let sorted = self.topological_order()?;
        let mut changed = sorted != self.order;
        self.order = sorted;
        for node in &mut self.nodes {
            for attribute in &mut node.attributes {
                for sub in attribute.value.subgraphs_mut() {
                    changed |= sub.sort_topologically()?;
                }
            }
        }
        Ok(changed)
    }

    /// For each position in `order`, the positions of the nodes it depends on.
    fn predecessors(&self) -> Result<Vec<Vec<usize>>, IrError> {
        let mut position: Vec<Option<usize>> = vec![None; self.nodes.len()];
        for (pos, id) in self.order.iter().enumerate() {
            match position.get_mut(id.index()) {
                Some(slot) => {
                    slot.get_or_insert(pos);
                }
                None => {
                    return Err(IrError::InvalidHandle {
                        graph: self.name_or_empty().to_string(),
                        what: "node",
                        index: id.0,
                    })
                }
            }
        }
        let producer_pos = |value: &crate::graph::Value| {
            value
                .producer
                .and_then(|(n, _)| position.get(n.index()).copied().flatten())
        };
        // Definitions by name, for implicit inputs of subgraphs (built only when needed).
        let mut definers: Option<BTreeMap<Name, Vec<usize>>> = None;
        let mut preds = Vec::with_capacity(self.order.len());
        for (pos, &id) in self.order.iter().enumerate() {
            let Some(node) = self.get_node(id) else {
                preds.push(Vec::new());
                continue;
            };
            let mut list = Vec::new();
            for input in node.inputs.iter().flatten() {
                let value = self
                    .get_value(*input)
                    .ok_or_else(|| IrError::InvalidHandle {
                        graph: self.name_or_empty().to_string(),
                        what: "value",
                        index: input.0,
                    })?;
                list.extend(producer_pos(value));
            }
            if node.subgraphs().next().is_some() {
                let definers = definers.get_or_insert_with(|| self.definers_by_name(&position));
                let mut implicit: Vec<Name> =
                    node.subgraphs().flat_map(|g| g.outer_reads()).collect();
                implicit.sort();
                implicit.dedup();
                for name in implicit {
                    let Some(positions) = definers.get(&name) else {
                        continue;
                    };
                    let before = positions.iter().rev().find(|&&p| p < pos);
                    if let Some(&p) = before.or(positions.first()) {
                        list.push(p);
                    }
                }
            }
            preds.push(list);
        }
        Ok(preds)
    }

    fn definers_by_name(&self, position: &[Option<usize>]) -> BTreeMap<Name, Vec<usize>> {
        let mut map: BTreeMap<Name, Vec<usize>> = BTreeMap::new();
        for value in &self.values {
            if let Some(p) = value
                .producer
                .and_then(|(n, _)| position.get(n.index()).copied().flatten())
            {
                map.entry(value.name.clone()).or_default().push(p);
            }
        }
        for list in map.values_mut() {
            list.sort_unstable();
        }
        map
    }
}

/// A position on a cycle among the nodes Kahn's algorithm could not emit: walking from the
/// first of them to a remaining predecessor (every one has one) must revisit a node.
fn node_on_cycle(preds: &[Vec<usize>], done: &[bool]) -> usize {
    let remaining = |p: usize| !done.get(p).copied().unwrap_or(true);
    let Some(mut cur) = (0..done.len()).find(|&p| remaining(p)) else {
        return 0;
    };
    let mut seen = vec![false; done.len()];
    loop {
        if let Some(flag) = seen.get_mut(cur) {
            if *flag {
                return cur;
            }
            *flag = true;
        }
        let next = preds
            .get(cur)
            .and_then(|list| list.iter().copied().filter(|&p| remaining(p)).min());
        match next {
            Some(p) => cur = p,
            None => return cur,
        }
    }
}
