//! The analysis of one operator e-node, called from `make`: constant folding and type
//! inference. When every input is a known constant, the op is deterministic and has no
//! subgraph, it is evaluated with the reference interpreter's kernel (the same kernel the
//! interpreter runs) and the result kept if it fits the size budget. Otherwise the output types
//! (and symbolic shape values) come from onnx-schema's per-op inference. Layer: above `egraph`
//! (the data it fills), below `analysis` (which calls it).

use egg::Id;
use onnx_proto::{AttributeProto, NodeProto};
use onnx_schema::infer::{InputInfo, SymDim};

use crate::egraph::{ClassData, OnnxEGraph};
use crate::lang::{ConstId, NodeKind, OpId};
use crate::tables::OpInfo;

/// Ops never folded even with constant inputs: their value is not a function of the inputs, or
/// folding them would change what the model means to a runtime (quantization boundaries).
const NEVER_FOLD: &[&str] = &[
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
];

pub(crate) fn analyze_op(egraph: &mut OnnxEGraph, op: OpId, children: &[Id]) -> ClassData {
    let info = egraph.analysis.ops.get(op).clone();
    let n_attrs = info.attr_names.len();
    // Attributes must be concrete (a `None` child is an absent attribute without default).
    let mut attribute = Vec::with_capacity(n_attrs);
    let mut has_graph = false;
    for (name, &c) in info.attr_names.iter().zip(&children[..n_attrs]) {
        match egraph[c].data.attr {
            Some(a) => {
                let mut p = egraph.analysis.attrs.get(a).clone();
                has_graph |= p.g.is_some() || !p.graphs.is_empty();
                p.name = Some(name.clone());
                attribute.push(p);
            }
            None => {
                if !is_none(egraph, c) {
                    return ClassData::default();
                }
            }
        }
    }
    let foldable = egraph.analysis.fold.enabled
        && !info.nondeterministic
        && info.implicit_inputs.is_empty()
        && info.has_schema
        && !has_graph
        && !NEVER_FOLD.contains(&info.op_type.as_str());
    let mut inferred = infer_op(egraph, &info, &attribute, &children[n_attrs..]);
    if inferred.constant.is_none() {
        inferred.splat = splat(egraph, &info, &attribute, &children[n_attrs..]);
    }
    if foldable && inferred.constant.is_none() {
        if let Some(data) = fold_view(egraph, &info, &inferred, &children[n_attrs..]) {
            return data;
        }
    }
    if foldable
        && inferred.constant.is_none()
        && within_budget(egraph, &info, &inferred, &children[n_attrs..])
    {
        if let Some(data) = fold_op(egraph, &info, attribute, &children[n_attrs..]) {
            return data;
        }
    }
    inferred
}

/// Ops whose every output element is an element of their first input: where that input holds
/// one value everywhere, so does the output.
const SPLAT_KEEPING: &[&str] = &[
    "Identity",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Expand",
    "Transpose",
    "Slice",
    "Tile",
    "Gather",
    "GatherElements",
    "GatherND",
];

/// The one-element constant every element of the op's output equals, where the analysis can
/// tell (`ClassData::splat`): ConstantOfShape's value, or a [`SPLAT_KEEPING`] op of a splat or
/// of a one-element constant.
fn splat(
    egraph: &mut OnnxEGraph,
    info: &OpInfo,
    attribute: &[AttributeProto],
    inputs: &[Id],
) -> Option<ConstId> {
    if !info.domain.is_empty() || info.is_tuple {
        return None;
    }
    if info.op_type == "ConstantOfShape" {
        let value = match attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("value"))
        {
            Some(a) => a.t.clone()?,
            None => onnx_proto::TensorProto {
                dims: vec![1],
                data_type: Some(onnx_proto::tensor_proto::DataType::Float as i32),
                raw_data: Some(vec![0u8; 4].into()),
                ..Default::default()
            },
        };
        return (value.dims.iter().product::<i64>() == 1)
            .then(|| egraph.analysis.consts.intern(value));
    }
    if !SPLAT_KEEPING.contains(&info.op_type.as_str()) {
        return None;
    }
    let d = &egraph[*inputs.first()?].data;
    d.splat.or_else(|| {
        d.constant.filter(|&k| {
            egraph
                .analysis
                .consts
                .get(k)
                .tensor
                .dims
                .iter()
                .product::<i64>()
                == 1
        })
    })
}

/// Ops whose output holds the bytes of their first input unchanged, only with other dims.
const VIEW_OPS: &[&str] = &["Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten"];

/// Folds a view op of a constant without decoding it: Identity is its input's constant, and a
/// reshaping op of a `raw_data` tensor is a tensor sharing those bytes under the inferred
/// static shape. No copy of the data is made, whatever its size.
fn fold_view(
    egraph: &mut OnnxEGraph,
    info: &OpInfo,
    inferred: &ClassData,
    inputs: &[Id],
) -> Option<ClassData> {
    if !info.domain.is_empty() || !VIEW_OPS.contains(&info.op_type.as_str()) || info.is_tuple {
        return None;
    }
    let k = egraph[*inputs.first()?].data.constant?;
    if info.op_type == "Identity" {
        return Some(ClassData {
            constant: Some(k),
            ty: Some(crate::types::tensor_type_of(
                &egraph.analysis.consts.get(k).tensor,
            )),
            ..Default::default()
        });
    }
    let ty = inferred.ty.as_ref()?;
    let dims: Vec<i64> = onnx_schema::infer::shape_of(ty)?
        .iter()
        .map(|d| d.known())
        .collect::<Option<_>>()?;
    let source = egraph.analysis.consts.get(k).tensor.clone();
    let raw = source.raw_data.clone()?;
    let external =
        source.data_location == Some(onnx_proto::tensor_proto::DataLocation::External as i32);
    let count: i64 = dims.iter().product();
    let source_count: i64 = source.dims.iter().product();
    if external || source.segment.is_some() || count != source_count {
        return None;
    }
    let tensor = onnx_proto::TensorProto {
        dims,
        data_type: source.data_type,
        raw_data: Some(raw),
        ..Default::default()
    };
    let c = egraph.analysis.consts.intern(tensor);
    Some(ClassData {
        constant: Some(c),
        ty: Some(crate::types::tensor_type_of(
            &egraph.analysis.consts.get(c).tensor,
        )),
        ..Default::default()
    })
}

/// Ops whose output is data made from a small description (a shape, a repeat count): folding
/// them writes that data into the file, so they get no allowance beyond their inputs' size
/// but a few elements (a model never grows by folding them).
const GENERATING_OPS: &[&str] = &[
    "ConstantOfShape",
    "Tile",
    "Expand",
    "Range",
    "EyeLike",
    "OneHot",
];

/// Bytes a generating op's result may exceed its constant inputs by.
const GENERATING_FLOOR: usize = 64;

fn budget_floor_for(info: &OpInfo, floor: usize) -> usize {
    if info.domain.is_empty() && GENERATING_OPS.contains(&info.op_type.as_str()) {
        floor.min(GENERATING_FLOOR)
    } else {
        floor
    }
}

/// What a constant input counts for in a folding budget: its bytes, but one byte per element
/// for a type narrower than a byte (int4, uint4, float4e2m1, int2, uint2, the float6 types).
/// Their packing is a storage detail: a Cast of 4-bit weights to a byte type (repacking them
/// for another runtime's layout, as `rules/onnxruntime.rules` does for MatMulNBits) is allowed
/// the same elements at a byte each, and no more.
fn budget_bytes(entry: &crate::tables::ConstEntry) -> usize {
    let narrow = entry
        .tensor
        .data_type
        .and_then(onnx_ref::DType::from_code)
        .is_some_and(|d| d.bit_width() > 0 && d.bit_width() < 8);
    if narrow {
        let elems: i64 = entry.tensor.dims.iter().product();
        entry
            .bytes
            .max(usize::try_from(elems).unwrap_or(usize::MAX))
    } else {
        entry.bytes
    }
}

/// False when inference already shows the result is over the folding budget (so a huge
/// ConstantOfShape/Expand/Tile is never computed just to be thrown away).
fn within_budget(egraph: &OnnxEGraph, info: &OpInfo, inferred: &ClassData, inputs: &[Id]) -> bool {
    let Some(floor) = egraph.analysis.fold.budget_floor else {
        return true;
    };
    let floor = budget_floor_for(info, floor);
    let input_bytes: usize = inputs[..info.n_inputs]
        .iter()
        .filter_map(|&c| egraph[c].data.constant)
        .map(|k| budget_bytes(egraph.analysis.consts.get(k)))
        .sum();
    let budget = floor.max(input_bytes) as f64;
    let types: Vec<&onnx_proto::TypeProto> = match &inferred.tuple_types {
        Some(t) => t.iter().filter_map(|(ty, _)| ty.as_ref()).collect(),
        None => inferred.ty.iter().collect(),
    };
    types.iter().all(|ty| match crate::types::static_bytes(ty) {
        Some(b) => b <= budget,
        None => true,
    })
}

/// Output types and symbolic values from the schema's inference rules.
fn infer_op(
    egraph: &mut OnnxEGraph,
    info: &OpInfo,
    attribute: &[AttributeProto],
    inputs: &[Id],
) -> ClassData {
    let mut data = ClassData::default();
    let Some(schema) =
        onnx_schema::registry().lookup(&info.domain, &info.op_type, info.since_version)
    else {
        return data;
    };
    let inputs = &inputs[..info.n_inputs];
    let none: Vec<bool> = inputs.iter().map(|&c| is_none(egraph, c)).collect();
    let tensors: Vec<Option<std::sync::Arc<onnx_proto::TensorProto>>> = inputs
        .iter()
        .map(|&c| {
            egraph[c]
                .data
                .constant
                .map(|k| egraph.analysis.consts.get(k).tensor.clone())
        })
        .collect();
    let infos: Vec<Option<InputInfo<'_>>> = inputs
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            if none[i] {
                return None;
            }
            let d = &egraph[c].data;
            Some(InputInfo {
                ty: d.ty.as_ref(),
                constant: tensors[i].as_deref(),
                sym_value: d.sym.as_deref(),
            })
        })
        .collect();
    let Ok(outputs) = onnx_schema::infer::infer_node(
        schema,
        egraph.analysis.effective_opset(info),
        attribute,
        &infos,
        info.n_outputs.max(1),
    ) else {
        return data;
    };
    if info.is_tuple {
        data.tuple_types = Some(outputs.into_iter().map(|o| (o.ty, o.sym_value)).collect());
    } else if let Some(o) = outputs.into_iter().next() {
        data.ty = o.ty;
        data.sym = o.sym_value;
        // Shape arithmetic whose dims are all known is a constant.
        if egraph.analysis.fold.enabled {
            if let Some(t) = known_shape_constant(data.ty.as_ref(), data.sym.as_deref()) {
                data.constant = Some(egraph.analysis.consts.intern(t));
            }
        }
    }
    data
}

/// An int64 (or bool) scalar or vector whose symbolic value is fully known, as a tensor.
fn known_shape_constant(
    ty: Option<&onnx_proto::TypeProto>,
    sym: Option<&[SymDim]>,
) -> Option<onnx_proto::TensorProto> {
    let sym = sym?;
    let values: Vec<i64> = sym.iter().map(|d| d.known()).collect::<Option<_>>()?;
    let shape = onnx_schema::infer::shape_of(ty?)?;
    let dims: Vec<i64> = match shape.len() {
        0 if values.len() == 1 => vec![],
        1 => vec![values.len() as i64],
        _ => return None,
    };
    use onnx_proto::tensor_proto::DataType;
    let elem = onnx_schema::infer::elem_type_of(ty?)?;
    // Shape arithmetic is int64; comparisons of shape vectors (torch's expand guard) are bool.
    let raw: Vec<u8> = if elem == DataType::Int64 as i32 {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    } else if elem == DataType::Bool as i32 && values.iter().all(|&v| v == 0 || v == 1) {
        values.iter().map(|&v| v as u8).collect()
    } else {
        return None;
    };
    Some(onnx_proto::TensorProto {
        dims,
        data_type: Some(elem),
        raw_data: Some(raw.into()),
        ..Default::default()
    })
}

fn fold_op(
    egraph: &mut OnnxEGraph,
    info: &OpInfo,
    attribute: Vec<AttributeProto>,
    children: &[Id],
) -> Option<ClassData> {
    let mut data = ClassData::default();
    let inputs = &children[..info.n_inputs];
    // Every present input must be constant before any is decoded.
    if inputs
        .iter()
        .any(|&c| egraph[c].data.constant.is_none() && !is_none(egraph, c))
    {
        return None;
    }
    let mut values = Vec::with_capacity(inputs.len());
    let mut input_names = Vec::with_capacity(inputs.len());
    let mut input_bytes = 0usize;
    for (i, &c) in inputs.iter().enumerate() {
        if is_none(egraph, c) {
            values.push(None);
            input_names.push(String::new());
            continue;
        }
        let k = egraph[c].data.constant?;
        input_bytes += budget_bytes(egraph.analysis.consts.get(k));
        match egraph.analysis.const_value(k) {
            Ok(v) => values.push(Some((*v).clone())),
            Err(e) => {
                egraph
                    .analysis
                    .fold_failures
                    .push((info.op_type.clone(), e.to_string()));
                return None;
            }
        }
        input_names.push(format!("in{i}"));
    }
    let node = NodeProto {
        op_type: Some(info.op_type.clone()),
        domain: if info.domain.is_empty() {
            None
        } else {
            Some(info.domain.clone())
        },
        input: input_names,
        output: (0..info.n_outputs.max(1))
            .map(|i| format!("out{i}"))
            .collect(),
        attribute,
        ..Default::default()
    };
    let outputs = match onnx_ref::eval_node(&node, egraph.analysis.effective_opset(info), &values) {
        Ok(o) => o,
        Err(e) => {
            egraph
                .analysis
                .fold_failures
                .push((info.op_type.clone(), e.to_string()));
            return None;
        }
    };
    let budget = egraph
        .analysis
        .fold
        .budget_floor
        .map(|floor| budget_floor_for(info, floor).max(input_bytes));
    let mut ids = Vec::with_capacity(outputs.len());
    for out in &outputs {
        let onnx_ref::Value::Tensor(t) = out else {
            return None;
        };
        if let Some(b) = budget {
            if t.dtype()
                .raw_len(t.len())
                .unwrap_or(t.len().saturating_mul(16))
                > b
            {
                egraph.analysis.over_budget += 1;
                return None;
            }
        }
        ids.push(t);
    }
    let ids: Vec<_> = ids
        .into_iter()
        .map(|t| egraph.analysis.intern_value(t))
        .collect();
    if info.is_tuple {
        data.tuple_constants = Some(ids.into_iter().map(Some).collect());
    } else if let Some(&c) = ids.first() {
        data.constant = Some(c);
        data.ty = Some(crate::types::tensor_type_of(
            &egraph.analysis.consts.get(c).tensor,
        ));
    }
    Some(data)
}

fn is_none(egraph: &OnnxEGraph, c: Id) -> bool {
    egraph[c].nodes.iter().any(|n| n.kind == NodeKind::None)
}
