//! The egg language of ONNX graphs.
//!
//! One e-node kind for every operator: [`NodeKind::Op`] with an interned [`OpId`] naming
//! (domain, op_type, schema since_version, attribute layout, output count); its children are the
//! attribute leaves in layout order (schema order, defaults filled in) followed by the inputs
//! (absent optional inputs are [`NodeKind::None`] leaves) and, for ops with subgraphs, the
//! outer-scope values the subgraphs read. Leaves: [`NodeKind::Input`] (graph inputs),
//! [`NodeKind::Const`] (content-addressed tensors), [`NodeKind::Attr`] (interned attribute
//! values), [`NodeKind::Unique`] (the discriminator that keeps nondeterministic ops apart).
//! A multi-output op denotes the tuple of its outputs; [`NodeKind::Out`] projects one.
//! [`NodeKind::Root`] joins the graph outputs.

use egg::{Id, Language};

/// Index into the op table of the analysis ([`crate::tables::OpTable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u32);

/// Index into the attribute table of the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttrId(pub u32);

/// Index into the constant store (one id per distinct tensor content).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConstId(pub u32);

/// What an e-node is; its children live in [`ONode::children`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeKind {
    /// An operator application.
    Op(OpId),
    /// An attribute value (leaf).
    Attr(AttrId),
    /// Graph input number `n` (or an outer-scope value of a subgraph), a leaf.
    Input(u32),
    /// A constant tensor (leaf).
    Const(ConstId),
    /// An absent optional input or attribute without default (leaf).
    None,
    /// Output `i` of the tuple denoted by the single child.
    Out(u32),
    /// The discriminator of one nondeterministic node (leaf); never merged with another.
    Unique(u32),
    /// The graph outputs, in order.
    Root,
}

/// An e-node: a kind and its children.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ONode {
    pub kind: NodeKind,
    pub children: Vec<Id>,
}

impl ONode {
    pub fn leaf(kind: NodeKind) -> Self {
        ONode {
            kind,
            children: Vec::new(),
        }
    }
    pub fn new(kind: NodeKind, children: Vec<Id>) -> Self {
        ONode { kind, children }
    }
}

impl Language for ONode {
    type Discriminant = NodeKind;

    fn discriminant(&self) -> NodeKind {
        self.kind
    }

    fn matches(&self, other: &Self) -> bool {
        self.kind == other.kind && self.children.len() == other.children.len()
    }

    fn children(&self) -> &[Id] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut [Id] {
        &mut self.children
    }
}

impl std::fmt::Display for ONode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            NodeKind::Op(o) => write!(f, "op{}", o.0),
            NodeKind::Attr(a) => write!(f, "attr{}", a.0),
            NodeKind::Input(i) => write!(f, "input{i}"),
            NodeKind::Const(c) => write!(f, "const{}", c.0),
            NodeKind::None => write!(f, "none"),
            NodeKind::Out(i) => write!(f, "out{i}"),
            NodeKind::Unique(u) => write!(f, "unique{u}"),
            NodeKind::Root => write!(f, "root"),
        }
    }
}
