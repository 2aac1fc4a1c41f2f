//! The generator's output: nodes (evaluated as they are added), logical parameters written as
//! attributes or constant inputs per the op's schema version, and the model.

use std::collections::BTreeSet;

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{
    tensor_shape_proto, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use onnx_ref::{DType, Tensor, Value};

use super::seq::ContainerType;
use super::{
    dtype_of_type_str, type_str, AState, AVal, Binding, Gen, GenValue, Instance, Loc, OpCall,
    Reject, Slot, ValueKind, MAX_ELEMENTS,
};
use crate::choice::{float_tensor, int_tensor, random_tensor, DataOpts};

impl Gen<'_> {
    /// The tensor of a logical parameter that is an input at this opset.
    pub(super) fn param_tensor(
        &self,
        c: &OpCall,
        k: usize,
        v: &AVal,
        name: &str,
    ) -> Result<Tensor, Reject> {
        let f = &c.schema.inputs[k];
        let first = c.inputs.first().and_then(|s| match s {
            Slot::Known(i) => Some(self.values[*i].tensor.dtype()),
            _ => None,
        });
        let allowed = c.schema.allowed_types(&f.type_str).unwrap_or(&[]);
        let ok = |d: DType| type_str(d).is_some_and(|t| allowed.contains(&t));
        let dtype = if let Some(d) = dtype_of_type_str(&f.type_str) {
            d
        } else if let Some(d) = first.filter(|&d| ok(d)) {
            d
        } else if ok(DType::Int64) {
            DType::Int64
        } else if ok(DType::Float) {
            DType::Float
        } else if ok(DType::Bool) {
            DType::Bool
        } else {
            self.dtype
        };
        let t = match v {
            AVal::Ints(l) => {
                if dtype.is_float() {
                    float_tensor(dtype, &[l.len()], l.iter().map(|&x| x as f64).collect())
                } else {
                    int_tensor(dtype, &[l.len()], l.clone())
                }
            }
            AVal::Floats(l) => float_tensor(dtype, &[l.len()], l.clone()),
            AVal::Int(i) => {
                let shape: &[usize] = if name == "k" { &[1] } else { &[] };
                if dtype.is_float() {
                    float_tensor(dtype, shape, vec![*i as f64])
                } else {
                    int_tensor(dtype, shape, vec![*i])
                }
            }
            AVal::Float(x) => {
                if dtype.is_float() {
                    float_tensor(dtype, &[], vec![*x])
                } else {
                    int_tensor(dtype, &[], vec![x.round() as i64])
                }
            }
            AVal::Str(_) | AVal::Strs(_) | AVal::Tensor(_) | AVal::Absent => None,
        };
        match t {
            Some(t) => Ok(t),
            None => self.reject(format!("cannot write {name} as an input")),
        }
    }

    pub(super) fn build_node(&mut self, c: &OpCall, domain: &str) -> Result<Vec<usize>, Reject> {
        let mut names: Vec<String> = Vec::new();
        let set = |names: &mut Vec<String>, pos: usize, n: String| {
            if names.len() <= pos {
                names.resize(pos + 1, String::new());
            }
            names[pos] = n;
        };
        for (i, s) in c.inputs.iter().enumerate() {
            match s {
                Slot::Known(k) => set(&mut names, c.node_pos[i], self.values[*k].name.clone()),
                Slot::Absent => {}
                Slot::Free { .. } => return self.reject("an input left unplanned"),
            }
        }
        let mut attributes = Vec::new();
        for a in &c.attrs {
            let v = match &a.state {
                AState::Fixed(v) | AState::Done(v) => v.clone(),
                AState::Free => AVal::Absent,
            };
            if v == AVal::Absent {
                continue;
            }
            match &a.loc {
                Loc::Attr(n) => {
                    let ty = c
                        .schema
                        .attribute(n)
                        .map(|s| s.ty)
                        .unwrap_or(AttributeType::Undefined);
                    match to_attribute(n, ty, &v) {
                        Some(p) => attributes.push(p),
                        None => return self.reject(format!("attribute {n} of the wrong type")),
                    }
                }
                Loc::Input(k) => {
                    let computed = a.var.filter(|v| self.hints.nonconst.contains(v));
                    let idx = match computed {
                        Some(var) => self.bind_shape_of_input(var, &v)?,
                        None => {
                            let t = self.param_tensor(c, *k, &v, &a.name)?;
                            let name = self.fresh_name(&a.name);
                            self.push_value(GenValue {
                                name,
                                tensor: t,
                                kind: ValueKind::Init,
                                data: DataOpts::default(),
                                container: None,
                            })
                        }
                    };
                    set(&mut names, *k, self.values[idx].name.clone());
                }
            }
        }
        while names.last().is_some_and(|n| n.is_empty()) {
            names.pop();
        }
        if c.commutative && names.len() == 2 && self.ch.one_in(2) {
            names.swap(0, 1);
        }
        self.add_node(
            &c.op_type,
            domain,
            names,
            attributes,
            c.n_outputs.max(1),
            c.opset,
        )
    }

    /// A computed int64 vector equal to `v` (non-negative ints): `Shape` of a new graph input
    /// of that shape, so that the engine sees it symbolically.
    pub(super) fn shape_of_input(&mut self, v: &AVal) -> Result<usize, Reject> {
        let dims = match v.as_ints() {
            Some(d) if d.iter().all(|&x| x >= 0) => d,
            _ => return self.reject("a computed shape with negative entries"),
        };
        let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        if shape.iter().product::<usize>() > MAX_ELEMENTS {
            return self.reject("a shape source over the size limit");
        }
        let data = DataOpts::default();
        let Some(t) = random_tensor(&mut self.rng, DType::Float, &shape, &data) else {
            return self.reject("cannot generate a shape source");
        };
        let name = self.fresh_name("shape_src");
        let src = self.push_value(GenValue {
            name: name.clone(),
            tensor: t,
            kind: ValueKind::Input,
            data,
            container: None,
        });
        let _ = src;
        Ok(self.add_node("Shape", "", vec![name], Vec::new(), 1, self.opset)?[0])
    }

    /// [`Self::shape_of_input`], bound to the variable `var` (a computed shape: `!is_const(var)`).
    pub(crate) fn bind_shape_of_input(
        &mut self,
        var: onnx_rules::ir::VarId,
        v: &AVal,
    ) -> Result<usize, Reject> {
        let idx = self.shape_of_input(v)?;
        self.env[var.0 as usize] = Some(Binding::Value(idx));
        Ok(idx)
    }

    /// Adds a node with tensor outputs and evaluates it at once; returns its outputs.
    pub(super) fn add_node(
        &mut self,
        op_type: &str,
        domain: &str,
        names: Vec<String>,
        attributes: Vec<AttributeProto>,
        n_outputs: usize,
        opset: i64,
    ) -> Result<Vec<usize>, Reject> {
        let types = vec![None; n_outputs];
        self.add_typed_node(op_type, domain, names, attributes, &types, opset)
    }

    /// Adds a node whose outputs have the given types (`None`: a tensor; else a sequence or an
    /// optional) and evaluates it at once; returns its outputs. An output of another type
    /// than asked rejects the node.
    pub(super) fn add_typed_node(
        &mut self,
        op_type: &str,
        domain: &str,
        names: Vec<String>,
        attributes: Vec<AttributeProto>,
        types: &[Option<ContainerType>],
        opset: i64,
    ) -> Result<Vec<usize>, Reject> {
        let outputs: Vec<String> = types.iter().map(|_| self.fresh_name("t")).collect();
        let node = NodeProto {
            input: names.clone(),
            output: outputs.clone(),
            op_type: Some(op_type.to_string()),
            domain: (!domain.is_empty()).then(|| domain.to_string()),
            attribute: attributes,
            ..Default::default()
        };
        let args: Vec<Option<Value>> = names
            .iter()
            .map(|n| (!n.is_empty()).then(|| self.values[self.by_name[n]].value()))
            .collect();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            onnx_ref::eval_node(&node, opset, &args)
        }));
        let outs = match result {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return self.reject(format!("{op_type}: {e}")),
            Err(_) => return self.reject(format!("{op_type}: the kernel panicked")),
        };
        if outs.len() < outputs.len() {
            return self.reject(format!("{op_type}: fewer outputs than asked"));
        }
        let mut ids = Vec::new();
        for ((name, v), ty) in outputs.iter().zip(outs).zip(types) {
            let id = match (ty, v) {
                (None, Value::Tensor(t)) => {
                    if t.len() > MAX_ELEMENTS {
                        return self.reject("an output over the size limit");
                    }
                    self.push_value(GenValue {
                        name: name.clone(),
                        tensor: t,
                        kind: ValueKind::Node,
                        data: DataOpts::default(),
                        container: None,
                    })
                }
                (Some(ty), v) if ty.holds(&v) => {
                    self.push_container(name.clone(), *ty, v, ValueKind::Node)?
                }
                _ => return self.reject(format!("{op_type}: an output of an unexpected type")),
            };
            ids.push(id);
        }
        self.nodes.push(node);
        Ok(ids)
    }

    pub(super) fn value_info(&self, k: usize, symbolic: bool) -> ValueInfoProto {
        if let Some(ty) = self.container_type_proto(k, symbolic) {
            return ValueInfoProto {
                name: Some(self.values[k].name.clone()),
                r#type: Some(ty),
                ..Default::default()
            };
        }
        let t = &self.values[k].tensor;
        let dim = declared_dims(t.shape(), symbolic);
        ValueInfoProto {
            name: Some(self.values[k].name.clone()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(t.dtype().code()),
                    shape: Some(TensorShapeProto { dim }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    pub(super) fn finish(mut self, roots: &[usize], data_seed: u64) -> Result<Instance, Reject> {
        let mut seen = BTreeSet::new();
        for &r in roots {
            if !seen.insert(r) || self.values[r].kind != ValueKind::Node {
                return self.reject("roots that are not distinct node outputs");
            }
        }
        // Name the outputs y, y2, ... (with `_` appended while another value has the name: a
        // rule's variable `y` names a graph input).
        let others: BTreeSet<String> = (0..self.values.len())
            .filter(|k| !roots.contains(k))
            .map(|k| self.values[k].name.clone())
            .collect();
        for (n, &r) in roots.iter().enumerate() {
            let mut new = if n == 0 {
                "y".to_string()
            } else {
                format!("y{}", n + 1)
            };
            while others.contains(&new) {
                new.push('_');
            }
            let old = std::mem::replace(&mut self.values[r].name, new.clone());
            for node in &mut self.nodes {
                for s in node.input.iter_mut().chain(node.output.iter_mut()) {
                    if *s == old {
                        *s = new.clone();
                    }
                }
            }
        }
        let name = self.rule.name.clone();
        let (ir, mut graph, inputs) = self.graph_of_leaves(&name);
        if inputs.is_empty() {
            return self.reject("no graph input (everything constant)");
        }
        for &r in roots {
            graph.output.push(self.value_info(r, false));
        }
        let mut opset_import = vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(self.opset),
        }];
        for (d, v) in &self.domains {
            opset_import.push(OperatorSetIdProto {
                domain: Some(d.clone()),
                version: Some(*v),
            });
        }
        let model = ModelProto {
            ir_version: Some(ir),
            opset_import,
            producer_name: Some("onnx-opt prove".into()),
            graph: Some(graph),
            ..Default::default()
        };
        let leaves = self.values.iter().filter(|v| v.kind != ValueKind::Node);
        let size = (
            leaves.clone().map(|v| v.tensor.len()).sum(),
            leaves.map(|v| v.tensor.rank()).sum(),
            model.graph.as_ref().map_or(0, |g| g.node.len()),
        );
        Ok(Instance {
            model,
            inputs,
            data_seed,
            used: self.ch.used(),
            size,
        })
    }
}

/// An attribute of the schema's type from a value.
fn to_attribute(name: &str, ty: AttributeType, v: &AVal) -> Option<AttributeProto> {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    match (ty, v) {
        (AttributeType::Int, v) => a.i = Some(v.as_int()?),
        (AttributeType::Float, AVal::Float(f)) => a.f = Some(*f as f32),
        (AttributeType::Float, AVal::Int(i)) => a.f = Some(*i as f32),
        (AttributeType::Ints, v) => a.ints = v.as_ints()?,
        (AttributeType::Floats, AVal::Floats(l)) => {
            a.floats = l.iter().map(|&f| f as f32).collect()
        }
        (AttributeType::Floats, AVal::Float(f)) => a.floats = vec![*f as f32],
        (AttributeType::String, AVal::Str(s)) => a.s = Some(s.clone().into_bytes().into()),
        (AttributeType::Tensor, AVal::Tensor(t)) => a.t = Some((**t).clone()),
        (AttributeType::Strings, AVal::Strs(l)) => {
            a.strings = l.iter().map(|s| s.clone().into_bytes().into()).collect()
        }
        // Cast-1 names its target type: an element type code becomes its name.
        (AttributeType::String, AVal::Int(code)) => {
            let name = DType::from_code(i32::try_from(*code).ok()?)?.name();
            a.s = Some(name.as_bytes().to_vec().into());
        }
        _ => return None,
    }
    Some(a)
}

impl Gen<'_> {
    /// The IR version of the instance's opset, and the graph of its nodes with its inputs and
    /// initializers (also listed as inputs below IR 4); returns the inputs' data too.
    pub(crate) fn graph_of_leaves(
        &mut self,
        name: &str,
    ) -> (i64, GraphProto, Vec<(String, Value, DataOpts)>) {
        let ir = onnx_schema::registry()
            .min_ir_version_for_opset(self.opset)
            .unwrap_or(10)
            .max(3);
        let mut graph = GraphProto {
            name: Some(name.to_string()),
            node: std::mem::take(&mut self.nodes),
            ..Default::default()
        };
        let mut inputs = Vec::new();
        for (k, v) in self.values.iter().enumerate() {
            match v.kind {
                ValueKind::Input => {
                    graph.input.push(self.value_info(k, self.symbolic));
                    inputs.push((v.name.clone(), v.value(), v.data));
                }
                ValueKind::Init => {
                    graph.initializer.push(v.tensor.to_proto(&v.name));
                    if ir < 4 {
                        graph.input.push(self.value_info(k, false));
                    }
                }
                ValueKind::Node => {}
            }
        }
        (ir, graph, inputs)
    }
}

/// The dims a graph input of shape `shape` is declared with: dims of 2 and more named `nD`
/// when the model is symbolic, the others as values.
pub(super) fn declared_dims(shape: &[usize], symbolic: bool) -> Vec<tensor_shape_proto::Dimension> {
    shape
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(if symbolic && d >= 2 {
                tensor_shape_proto::dimension::Value::DimParam(format!("n{d}"))
            } else {
                tensor_shape_proto::dimension::Value::DimValue(d as i64)
            }),
            ..Default::default()
        })
        .collect()
}
