//! The schema registry: every schema version indexed by (domain, op type), the per-domain opset
//! ranges, and onnx's release table. Layer: above `schema` and `error`; `parse` fills a registry
//! from a JSON table and `embedded` holds the parsed embedded copy ([`registry`]), both above
//! this module.
//!
//! [`registry`]: crate::registry()

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Result};
use crate::schema::OpSchema;

/// The default ONNX domain; "ai.onnx" is another spelling of it.
pub const DEFAULT_DOMAIN: &str = "";

/// The range of opset versions onnx registers for a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpsetRange {
    /// Lowest opset version of the domain.
    pub min: i64,
    /// Highest opset version of the domain this onnx release knows.
    pub max: i64,
}

/// One row of onnx's release table (`onnx.helper.VERSION_TABLE`): the IR version and the opset
/// versions a given onnx release introduced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseVersions {
    /// onnx release, e.g. "1.14.0".
    pub release: String,
    /// IR version written by that release.
    pub ir_version: i64,
    /// Highest opset of the default domain.
    pub ai_onnx: i64,
    /// Highest opset of "ai.onnx.ml".
    pub ai_onnx_ml: i64,
    /// Highest opset of "ai.onnx.training", for releases that had it.
    pub ai_onnx_training: Option<i64>,
}

/// Every operator schema of every version, indexed by (domain, op type).
///
/// Lookups treat "ai.onnx" as the default domain "". The embedded registry ([`registry`]) holds
/// onnx's schemas and onnxruntime's `com.microsoft` contrib ops ([`OpSchema::origin`]);
/// onnxruntime's versions of onnx-domain ops onnx lacks (its LayerNormalization-1) are apart, in
/// [`onnxruntime_extensions`], so that an opset-13 LayerNormalization binds nothing here.
///
/// [`registry`]: crate::registry()
/// [`onnxruntime_extensions`]: crate::onnxruntime_extensions
///
/// # Example
///
/// ```
/// use onnx_schema::{registry, SchemaOrigin};
///
/// let reg = registry();
/// // Softmax changed in opsets 11 and 13: an opset-12 node binds the opset-11 schema.
/// assert_eq!(reg.lookup("", "Softmax", 12).map(|s| s.since_version), Some(11));
/// assert_eq!(reg.lookup("ai.onnx", "Softmax", 13).map(|s| s.since_version), Some(13));
/// // GELU only exists from opset 20 on.
/// assert!(reg.lookup("", "Gelu", 19).is_none());
/// assert_eq!(reg.max_opset("ai.onnx"), Some(28));
/// // onnxruntime's contrib ops, and its LayerNormalization below opset 17.
/// let attention = reg.lookup("com.microsoft", "Attention", 1).unwrap();
/// assert_eq!(attention.origin, SchemaOrigin::OnnxRuntime);
/// assert!(reg.lookup("", "LayerNormalization", 13).is_none());
/// assert!(!reg.lookup("", "LayerNormalization", 17).unwrap().is_onnxruntime());
/// let ext = onnx_schema::onnxruntime_extensions();
/// assert!(ext.lookup("", "LayerNormalization", 13).unwrap().is_onnxruntime());
/// let versions: Vec<i64> = reg.versions("", "Softmax").iter().map(|s| s.since_version).collect();
/// assert_eq!(versions, [1, 11, 13]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaRegistry {
    /// domain -> op type -> versions sorted by since_version (hashed: lookups are hot; nothing
    /// iterates it).
    schemas: HashMap<String, HashMap<String, Vec<OpSchema>>>,
    /// domain -> op types, sorted: the iteration order of `domains`, `op_types` and `iter`.
    order: BTreeMap<String, Vec<String>>,
    opsets: BTreeMap<String, OpsetRange>,
    release_table: Vec<ReleaseVersions>,
    onnx_version: String,
    onnxruntime_version: Option<String>,
    len: usize,
}

/// Maps "ai.onnx" to "" and leaves other domains as they are.
pub fn normalize_domain(domain: &str) -> &str {
    if domain == "ai.onnx" {
        DEFAULT_DOMAIN
    } else {
        domain
    }
}

impl SchemaRegistry {
    /// Both registries' schemas in one: opset ranges of a domain in both are joined, the release
    /// table and onnx version are `self`'s (or `other`'s when `self` has none). Fails when a
    /// schema version (domain, op type, since_version) is in both.
    pub fn merge(self, other: SchemaRegistry) -> Result<Self> {
        let mut opsets = self.opsets;
        for (domain, range) in other.opsets {
            opsets
                .entry(domain)
                .and_modify(|r| {
                    r.min = r.min.min(range.min);
                    r.max = r.max.max(range.max);
                })
                .or_insert(range);
        }
        let release_table = if self.release_table.is_empty() {
            other.release_table
        } else {
            self.release_table
        };
        let onnx_version = if self.onnx_version.is_empty() {
            other.onnx_version
        } else {
            self.onnx_version
        };
        let onnxruntime_version = self.onnxruntime_version.or(other.onnxruntime_version);
        let list = [self.schemas, other.schemas]
            .into_iter()
            .flat_map(|domains| domains.into_values())
            .flat_map(|ops| ops.into_values())
            .flatten()
            .collect();
        Self::from_parts(
            list,
            opsets,
            release_table,
            onnx_version,
            onnxruntime_version,
        )
    }

    pub(crate) fn from_parts(
        list: Vec<OpSchema>,
        opsets: BTreeMap<String, OpsetRange>,
        release_table: Vec<ReleaseVersions>,
        onnx_version: String,
        onnxruntime_version: Option<String>,
    ) -> Result<Self> {
        let len = list.len();
        let mut schemas: BTreeMap<String, BTreeMap<String, Vec<OpSchema>>> = BTreeMap::new();
        for schema in list {
            schemas
                .entry(schema.domain.clone())
                .or_default()
                .entry(schema.name.clone())
                .or_default()
                .push(schema);
        }
        for versions in schemas.values_mut().flat_map(|ops| ops.values_mut()) {
            versions.sort_by_key(|s| s.since_version);
            if let Some(pair) = versions
                .windows(2)
                .find(|w| w[0].since_version == w[1].since_version)
            {
                return Err(Error::Inconsistent {
                    schema: pair[1].id(),
                    reason: "this schema version is listed twice".to_string(),
                });
            }
        }
        let order: BTreeMap<String, Vec<String>> = schemas
            .iter()
            .map(|(d, ops)| (d.clone(), ops.keys().cloned().collect()))
            .collect();
        let schemas: HashMap<String, HashMap<String, Vec<OpSchema>>> = schemas
            .into_iter()
            .map(|(d, ops)| (d, ops.into_iter().collect()))
            .collect();
        Ok(Self {
            schemas,
            order,
            opsets,
            release_table,
            onnx_version,
            onnxruntime_version,
            len,
        })
    }

    /// The schema a node of `op_type` in `domain` binds to under `opset_version`: the version
    /// with the highest `since_version` not above `opset_version`. `None` when the op is unknown
    /// or introduced after `opset_version`. Deprecated versions are returned (check
    /// [`OpSchema::deprecated`]).
    pub fn lookup(&self, domain: &str, op_type: &str, opset_version: i64) -> Option<&OpSchema> {
        let versions = self.versions(domain, op_type);
        let idx = versions.partition_point(|s| s.since_version <= opset_version);
        versions.get(idx.checked_sub(1)?)
    }

    /// Every version of an operator, sorted by `since_version`; empty when unknown.
    pub fn versions(&self, domain: &str, op_type: &str) -> &[OpSchema] {
        self.schemas
            .get(normalize_domain(domain))
            .and_then(|ops| ops.get(op_type))
            .map_or(&[], Vec::as_slice)
    }

    /// Whether any version of the operator exists.
    pub fn contains(&self, domain: &str, op_type: &str) -> bool {
        !self.versions(domain, op_type).is_empty()
    }

    /// The highest opset version onnx knows for `domain` ("" and "ai.onnx" give 28 for onnx
    /// 1.23.2; "com.microsoft" gives onnxruntime's 1). Includes domains without schemas
    /// ("ai.onnx.training").
    pub fn max_opset(&self, domain: &str) -> Option<i64> {
        self.opset_range(domain).map(|r| r.max)
    }

    /// The opset range onnx registers for `domain`.
    pub fn opset_range(&self, domain: &str) -> Option<OpsetRange> {
        self.opsets.get(normalize_domain(domain)).copied()
    }

    /// Every domain of the opset table with its range, sorted by domain ("" first).
    pub fn opset_ranges(&self) -> impl Iterator<Item = (&str, OpsetRange)> + '_ {
        self.opsets.iter().map(|(d, r)| (d.as_str(), *r))
    }

    /// The domains that have at least one schema, sorted ("" first).
    pub fn domains(&self) -> impl Iterator<Item = &str> + '_ {
        self.order.keys().map(String::as_str)
    }

    /// The operator types of `domain`, sorted.
    pub fn op_types(&self, domain: &str) -> impl Iterator<Item = &str> + '_ {
        self.order
            .get(normalize_domain(domain))
            .into_iter()
            .flat_map(|ops| ops.iter().map(String::as_str))
    }

    /// Number of schema versions over all domains.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the registry holds no schema.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every schema version, sorted by (domain, name, since_version).
    pub fn iter(&self) -> impl Iterator<Item = &OpSchema> + '_ {
        self.order
            .iter()
            .flat_map(move |(d, ops)| ops.iter().map(move |op| self.versions(d, op)))
            .flat_map(|versions| versions.iter())
    }

    /// onnx's release table, oldest release first.
    pub fn release_table(&self) -> &[ReleaseVersions] {
        &self.release_table
    }

    /// The lowest IR version of an onnx release whose default-domain opset reaches
    /// `opset_version` (onnx's rule for the minimal IR version of a model). `None` when the
    /// opset is newer than every release in the table.
    pub fn min_ir_version_for_opset(&self, opset_version: i64) -> Option<i64> {
        self.release_table
            .iter()
            .find(|r| r.ai_onnx >= opset_version)
            .map(|r| r.ir_version)
    }

    /// The onnx version the table was generated from ("1.23.2").
    pub fn onnx_version(&self) -> &str {
        &self.onnx_version
    }

    /// The onnxruntime version its schemas were read from ("1.31.1"); `None` for a registry
    /// of onnx's schemas only.
    pub fn onnxruntime_version(&self) -> Option<&str> {
        self.onnxruntime_version.as_deref()
    }
}
