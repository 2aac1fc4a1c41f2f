//! The interned tables behind e-node leaves: operators ([`OpTable`]), attribute values
//! ([`AttrTable`]) and constant tensors ([`ConstStore`]). Keys are dense indices handed out in
//! insertion order, so everything built from them is deterministic.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;
use indexmap::IndexSet;
use onnx_proto::{AttributeProto, Message, TensorProto};

use crate::lang::{AttrId, ConstId, OpId};

/// Everything that identifies an operator application apart from its children.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpInfo {
    /// The node's domain as written ("" for the default domain).
    pub domain: String,
    pub op_type: String,
    /// The since_version of the schema the node binds to; for ops without a schema, the
    /// domain's opset version. The model's opset is not part of an op's identity: two nodes
    /// binding the same schema are the same op whatever opset they were read at.
    pub since_version: i64,
    /// Attribute names, in child order.
    pub attr_names: Vec<String>,
    /// Number of regular inputs (children after the attributes): the schema's arity, absent
    /// optional inputs padded with `None`; for variadic ops, the node's count.
    pub n_inputs: usize,
    /// Names of the outer-scope values read by subgraph attributes (children after inputs).
    pub implicit_inputs: Vec<String>,
    /// Number of outputs of the node; more than one (or a schema that allows several) makes the
    /// e-node a tuple read through `Out`.
    pub n_outputs: usize,
    /// The schema's minimum number of outputs (unused outputs past it may be dropped).
    pub min_outputs: usize,
    /// True when the e-node denotes a tuple (read through `Out(i)`).
    pub is_tuple: bool,
    /// True for ops whose result is not a function of their inputs (RandomNormal, ...).
    pub nondeterministic: bool,
    /// True when a schema for the op was found.
    pub has_schema: bool,
}

/// Interned operator descriptions, indexed by (domain, op_type) for the rule matcher.
#[derive(Debug, Clone, Default)]
pub struct OpTable {
    ops: IndexSet<OpInfo>,
    by_type: BTreeMap<(String, String), Vec<OpId>>,
    /// The schema each op binds to (looked up once, at interning).
    schemas: Vec<Option<&'static onnx_schema::OpSchema>>,
}

impl OpTable {
    pub fn intern(&mut self, info: OpInfo) -> OpId {
        let key = (
            onnx_schema::normalize_domain(&info.domain).to_string(),
            info.op_type.clone(),
        );
        let schema = if info.has_schema {
            onnx_schema::registry().lookup(&info.domain, &info.op_type, info.since_version)
        } else {
            None
        };
        let (i, new) = self.ops.insert_full(info);
        let id = OpId(i as u32);
        if new {
            self.by_type.entry(key).or_default().push(id);
            self.schemas.push(schema);
        }
        id
    }
    pub fn get(&self, id: OpId) -> &OpInfo {
        &self.ops[id.0 as usize]
    }
    /// The schema the op binds to (`None` for ops without one).
    pub fn schema(&self, id: OpId) -> Option<&'static onnx_schema::OpSchema> {
        self.schemas.get(id.0 as usize).copied().flatten()
    }
    /// Every interned op of this (normalized) domain and op_type, in id order.
    pub fn of_type(&self, domain: &str, op_type: &str) -> &[OpId] {
        self.by_type
            .get(&(domain.to_string(), op_type.to_string()))
            .map_or(&[], |v| v.as_slice())
    }
    /// Number of interned ops.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// An attribute value without its name and doc string, compared by its encoding.
#[derive(Debug, Clone)]
pub struct AttrValue {
    pub proto: AttributeProto,
    encoded: Vec<u8>,
}

impl AttrValue {
    /// Canonicalizes: name and doc string are not part of the value.
    pub fn new(mut proto: AttributeProto) -> Self {
        proto.name = None;
        proto.doc_string = None;
        let encoded = proto.encode_to_vec();
        AttrValue { proto, encoded }
    }
}

impl PartialEq for AttrValue {
    fn eq(&self, other: &Self) -> bool {
        self.encoded == other.encoded
    }
}
impl Eq for AttrValue {}
impl Hash for AttrValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.encoded.hash(state)
    }
}

/// Interned attribute values.
#[derive(Debug, Clone, Default)]
pub struct AttrTable {
    attrs: IndexSet<AttrValue>,
}

impl AttrTable {
    pub fn intern(&mut self, proto: AttributeProto) -> AttrId {
        let (i, _) = self.attrs.insert_full(AttrValue::new(proto));
        AttrId(i as u32)
    }
    pub fn get(&self, id: AttrId) -> &AttributeProto {
        &self.attrs[id.0 as usize].proto
    }
}

/// One stored constant.
#[derive(Debug, Clone)]
pub struct ConstEntry {
    /// The tensor, unnamed; `raw_data` shares the model file's buffer when it came from it.
    pub tensor: Arc<TensorProto>,
    /// Size of the data in bytes (for folding budgets and cost models).
    pub bytes: usize,
}

/// Content-addressed constant tensors: identical content gets one [`ConstId`].
///
/// Tensors are keyed by dtype, dims and a fingerprint of a few sampled stretches of their
/// bytes, and compared byte for byte only when all of those match: a model's weights of one
/// shape (every layer's) are told apart without reading them through, so a weight no rule
/// reads is never read (a memory-mapped file's pages stay on disk).
#[derive(Debug, Clone, Default)]
pub struct ConstStore {
    entries: Vec<ConstEntry>,
    by_key: HashMap<u64, Vec<ConstId>>,
}

impl ConstStore {
    /// Stores a tensor (its name is dropped) and returns the id of its content.
    pub fn intern(&mut self, mut tensor: TensorProto) -> ConstId {
        tensor.name = None;
        tensor.doc_string = None;
        let content = content_bytes(&tensor);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        tensor.data_type.hash(&mut h);
        tensor.dims.hash(&mut h);
        fingerprint(&content, &mut h);
        let key = h.finish();
        if let Some(ids) = self.by_key.get(&key) {
            for &id in ids {
                let e = &self.entries[id.0 as usize].tensor;
                if e.data_type == tensor.data_type
                    && e.dims == tensor.dims
                    && content_bytes(e) == content
                {
                    return id;
                }
            }
        }
        let id = ConstId(self.entries.len() as u32);
        self.entries.push(ConstEntry {
            bytes: content.len(),
            tensor: Arc::new(tensor),
        });
        self.by_key.entry(key).or_default().push(id);
        id
    }

    pub fn get(&self, id: ConstId) -> &ConstEntry {
        &self.entries[id.0 as usize]
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Bytes up to which [`fingerprint`] hashes everything.
const FINGERPRINT_WHOLE: usize = 4096;

/// Stretches of bytes [`fingerprint`] samples from a larger buffer, and their length.
const FINGERPRINT_SAMPLES: usize = 16;
const FINGERPRINT_STRETCH: usize = 64;

/// Hashes the length and, up to [`FINGERPRINT_WHOLE`] bytes, the whole buffer; above that,
/// evenly spaced stretches from its start to its end. Equal buffers hash equal; unequal ones
/// are told apart by [`ConstStore::intern`]'s full comparison.
fn fingerprint(bytes: &[u8], h: &mut impl Hasher) {
    bytes.len().hash(h);
    if bytes.len() <= FINGERPRINT_WHOLE {
        bytes.hash(h);
        return;
    }
    let last = bytes.len() - FINGERPRINT_STRETCH;
    for i in 0..FINGERPRINT_SAMPLES {
        let at = last * i / (FINGERPRINT_SAMPLES - 1);
        bytes[at..at + FINGERPRINT_STRETCH].hash(h);
    }
}

/// The bytes that identify a tensor's content: `raw_data` when present, else the encoding of
/// its typed fields (the whole message without name).
fn content_bytes(t: &TensorProto) -> Bytes {
    match &t.raw_data {
        Some(raw) => raw.clone(),
        None => Bytes::from(t.encode_to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dims: &[i64], raw: Vec<u8>) -> TensorProto {
        TensorProto {
            name: Some("t".into()),
            dims: dims.to_vec(),
            data_type: Some(onnx_proto::tensor_proto::DataType::Uint8 as i32),
            raw_data: Some(Bytes::from(raw)),
            ..Default::default()
        }
    }

    /// Equal content merges whatever the name; a byte the fingerprint does not sample, other
    /// dims or another dtype keep tensors apart.
    #[test]
    fn only_equal_constants_share_an_id() {
        let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut other = big.clone();
        other[50_001] ^= 1;
        let mut store = ConstStore::default();
        let a = store.intern(tensor(&[100_000], big.clone()));
        let mut renamed = tensor(&[100_000], big.clone());
        renamed.name = Some("u".into());
        assert_eq!(store.intern(renamed), a);
        assert_ne!(store.intern(tensor(&[100_000], other)), a);
        assert_ne!(store.intern(tensor(&[1000, 100], big.clone())), a);
        let mut int8 = tensor(&[100_000], big);
        int8.data_type = Some(onnx_proto::tensor_proto::DataType::Int8 as i32);
        assert_ne!(store.intern(int8), a);
        assert_eq!(store.len(), 4);
        let small = store.intern(tensor(&[3], vec![1, 2, 3]));
        assert_eq!(store.intern(tensor(&[3], vec![1, 2, 3])), small);
        assert_ne!(store.intern(tensor(&[3], vec![1, 2, 4])), small);
    }
}
