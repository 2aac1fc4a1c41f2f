//! External tensor data: the `location`/`offset`/`length` entries of a `TensorProto` stored
//! outside the model file, resolved safely against the model's directory, read zero-copy, and
//! written at save time (moved into a new data file, or pointed back at the file they were
//! read from). Layer: above `file`, `mapped` and `data_writer`; `io` imports it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use bytes::Bytes;

use crate::data_writer::{DataWriter, WriteStats};
use crate::error::{io_err, Error, Result};
use crate::file::{map_file, write_atomic_file};
use crate::mapped::{source_of, MapKind};
use crate::onnx::{
    tensor_proto::DataLocation, GraphProto, ModelProto, StringStringEntryProto, TensorProto,
};

/// Where one tensor's bytes live outside the model file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalDataInfo {
    /// Path relative to the model's directory.
    pub location: String,
    /// Byte offset into the file.
    pub offset: u64,
    /// Byte length, or `None` for "to the end of the file".
    pub length: Option<u64>,
}

/// How tensors are externalized when saving.
#[derive(Debug, Clone)]
pub struct ExternalDataOptions {
    /// Tensors whose `raw_data` has at least this many bytes go to the data file.
    pub threshold: usize,
    /// The data file's name, relative to the output model's directory.
    pub location: String,
}

impl ExternalDataOptions {
    /// `<model file name>.data` beside the model, with the given threshold.
    pub fn for_model(model_path: &Path, threshold: usize) -> Self {
        let name = model_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model.onnx".into());
        ExternalDataOptions {
            threshold,
            location: format!("{name}.data"),
        }
    }
}

/// True when the tensor's data is stored externally.
pub fn is_external(t: &TensorProto) -> bool {
    t.data_location == Some(DataLocation::External as i32)
}

/// Parses a tensor's external-data entries (`None` when the tensor is stored inline).
pub fn external_data_info(t: &TensorProto, model_path: &Path) -> Result<Option<ExternalDataInfo>> {
    if !is_external(t) {
        return Ok(None);
    }
    let tensor = t.name.clone().unwrap_or_default();
    let bad = |reason: String| Error::ExternalData {
        path: model_path.to_path_buf(),
        tensor: tensor.clone(),
        reason,
    };
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for e in &t.external_data {
        let key = e.key.as_deref().unwrap_or("");
        let value = e.value.as_deref().unwrap_or("");
        match key {
            "location" => location = Some(value.to_string()),
            "offset" => {
                offset = value
                    .parse()
                    .map_err(|_| bad(format!("offset '{value}' is not a non-negative integer")))?
            }
            "length" => {
                length =
                    Some(value.parse().map_err(|_| {
                        bad(format!("length '{value}' is not a non-negative integer"))
                    })?)
            }
            // "checksum" and keys of future versions are kept in the proto and not interpreted.
            _ => {}
        }
    }
    let location = location.ok_or_else(|| bad("no 'location' entry".into()))?;
    Ok(Some(ExternalDataInfo {
        location,
        offset,
        length,
    }))
}

/// Resolves an external-data location against the model directory, refusing absolute paths,
/// `..` components, and symlinks that lead out of the directory.
pub fn resolve_external_path(
    dir: &Path,
    location: &str,
    model_path: &Path,
    tensor: &str,
) -> Result<PathBuf> {
    let escape = || Error::PathEscape {
        path: model_path.to_path_buf(),
        tensor: tensor.to_string(),
        location: location.to_string(),
    };
    let rel = Path::new(location);
    if location.is_empty()
        || rel.is_absolute()
        || location.starts_with('/')
        || location.starts_with('\\')
    {
        return Err(escape());
    }
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(escape());
    }
    let joined = dir.join(rel);
    let canon_dir = dir.canonicalize().map_err(crate::error::io_err(dir))?;
    let canon = joined
        .canonicalize()
        .map_err(crate::error::io_err(&joined))?;
    if !canon.starts_with(&canon_dir) {
        return Err(escape());
    }
    Ok(canon)
}

/// Reads an external tensor's bytes (memory-mapped, not copied). `files` holds the files mapped
/// so far, so that each is mapped once.
pub(crate) fn read_external(
    t: &TensorProto,
    dir: &Path,
    model_path: &Path,
    files: &mut BTreeMap<PathBuf, Bytes>,
) -> Result<Bytes> {
    let tensor = t.name.clone().unwrap_or_default();
    let info = external_data_info(t, model_path)?.ok_or_else(|| Error::ExternalData {
        path: model_path.to_path_buf(),
        tensor: tensor.clone(),
        reason: "tensor is not stored externally".into(),
    })?;
    let file = resolve_external_path(dir, &info.location, model_path, &tensor)?;
    let data = match files.get(&file) {
        Some(data) => data.clone(),
        None => {
            let data = map_file(&file, MapKind::ExternalData)?;
            files.insert(file, data.clone());
            data
        }
    };
    let total = data.len() as u64;
    let end = match info.length {
        Some(len) => info.offset.checked_add(len),
        None => Some(total),
    };
    match end {
        Some(end) if info.offset <= end && end <= total => {
            Ok(data.slice(info.offset as usize..end as usize))
        }
        _ => Err(Error::ExternalData {
            path: model_path.to_path_buf(),
            tensor,
            reason: format!(
                "range offset {} length {:?} is outside '{}' ({} bytes)",
                info.offset, info.length, info.location, total
            ),
        }),
    }
}

/// Calls `f` on every tensor of the model: initializers, sparse initializers, tensor
/// attributes, in the main graph, every subgraph, functions and training info.
pub fn for_each_tensor_mut(
    model: &mut ModelProto,
    f: &mut dyn FnMut(&mut TensorProto) -> Result<()>,
) -> Result<()> {
    if let Some(g) = model.graph.as_mut() {
        graph_tensors_mut(g, f)?;
    }
    for func in &mut model.functions {
        for n in &mut func.node {
            for a in &mut n.attribute {
                attr_tensors_mut(a, f)?;
            }
        }
    }
    for ti in &mut model.training_info {
        if let Some(g) = ti.initialization.as_mut() {
            graph_tensors_mut(g, f)?;
        }
        if let Some(g) = ti.algorithm.as_mut() {
            graph_tensors_mut(g, f)?;
        }
    }
    Ok(())
}

fn graph_tensors_mut(
    g: &mut GraphProto,
    f: &mut dyn FnMut(&mut TensorProto) -> Result<()>,
) -> Result<()> {
    for t in &mut g.initializer {
        f(t)?;
    }
    for s in &mut g.sparse_initializer {
        if let Some(t) = s.values.as_mut() {
            f(t)?;
        }
        if let Some(t) = s.indices.as_mut() {
            f(t)?;
        }
    }
    for n in &mut g.node {
        for a in &mut n.attribute {
            attr_tensors_mut(a, f)?;
        }
    }
    Ok(())
}

fn attr_tensors_mut(
    a: &mut crate::onnx::AttributeProto,
    f: &mut dyn FnMut(&mut TensorProto) -> Result<()>,
) -> Result<()> {
    if let Some(t) = a.t.as_mut() {
        f(t)?;
    }
    for t in &mut a.tensors {
        f(t)?;
    }
    for s in a
        .sparse_tensor
        .iter_mut()
        .chain(a.sparse_tensors.iter_mut())
    {
        if let Some(t) = s.values.as_mut() {
            f(t)?;
        }
        if let Some(t) = s.indices.as_mut() {
            f(t)?;
        }
    }
    if let Some(g) = a.g.as_mut() {
        graph_tensors_mut(g, f)?;
    }
    for g in &mut a.graphs {
        graph_tensors_mut(g, f)?;
    }
    Ok(())
}

/// True when any tensor of the model (at any depth) is stored externally.
pub fn any_external(model: &ModelProto) -> bool {
    // Tensor payloads are reference-counted `Bytes`, so the clone copies structure only.
    let mut model = model.clone();
    let mut found = false;
    let _ = for_each_tensor_mut(&mut model, &mut |t| {
        found |= is_external(t);
        Ok(())
    });
    found
}

/// Replaces every external tensor's location with its bytes as `raw_data` (zero-copy).
///
/// The files stay mapped while a tensor holds a slice of them; saving copies such slices file
/// to file in the kernel, and with `reuse_external_data` points them back at these files.
pub fn inline_external_data(model: &mut ModelProto, dir: &Path, model_path: &Path) -> Result<()> {
    let mut files = BTreeMap::new();
    for_each_tensor_mut(model, &mut |t| {
        if is_external(t) {
            let data = read_external(t, dir, model_path, &mut files)?;
            t.raw_data = Some(data);
            t.data_location = None;
            t.external_data.clear();
        }
        Ok(())
    })
}

/// A piece of a data file about to be written.
pub(crate) enum Chunk {
    /// Padding.
    Zeros(usize),
    /// A tensor's bytes.
    Data(Bytes),
}

/// Moves the `raw_data` of tensors at or above the threshold (and not external already) out of
/// the model, into the chunks of one data file, `opts.location`, each tensor at a 4 KiB-aligned
/// offset; points the tensors at it. Nothing is written yet.
pub(crate) fn move_to_data_file(
    model: &mut ModelProto,
    opts: &ExternalDataOptions,
) -> Result<Vec<Chunk>> {
    let mut chunks = Vec::new();
    let mut offset = 0u64;
    for_each_tensor_mut(model, &mut |t| {
        let Some(raw) = t.raw_data.as_ref() else {
            return Ok(());
        };
        if is_external(t) || raw.len() < opts.threshold {
            return Ok(());
        }
        // Align each tensor to 4 KiB so readers may map it directly.
        let aligned = offset.div_ceil(4096) * 4096;
        if aligned > offset {
            chunks.push(Chunk::Zeros((aligned - offset) as usize));
        }
        let len = raw.len() as u64;
        chunks.push(Chunk::Data(t.raw_data.take().unwrap_or_default()));
        t.data_location = Some(DataLocation::External as i32);
        t.external_data = vec![
            entry("location", &opts.location),
            entry("offset", &aligned.to_string()),
            entry("length", &len.to_string()),
        ];
        offset = aligned + len;
        Ok(())
    })?;
    Ok(chunks)
}

/// Writes a data file's chunks atomically, copying mapped bytes in the kernel (`data_writer`).
pub(crate) fn write_data_file(path: &Path, chunks: &[Chunk]) -> Result<WriteStats> {
    write_atomic_file(path, |file| {
        let mut w = DataWriter::new(file);
        for c in chunks {
            match c {
                Chunk::Zeros(n) => w.write_zeros(*n)?,
                Chunk::Data(bytes) => w.write_bytes(bytes)?,
            }
        }
        w.finish()
    })
}

/// Points every tensor whose `raw_data` is a slice of a loaded external-data file (one that
/// [`inline_external_data`] mapped, still mapped) back at that file and the slice's offset, by
/// a location relative to `out_dir`, the output model's directory. Refused, naming the file,
/// when the file is not inside `out_dir` (a location may not leave the model's directory).
pub(crate) fn refer_to_mapped_data(
    model: &mut ModelProto,
    out_dir: &Path,
    model_path: &Path,
) -> Result<()> {
    let canon_out = out_dir.canonicalize().map_err(io_err(out_dir))?;
    let mut locations: BTreeMap<PathBuf, String> = BTreeMap::new();
    for_each_tensor_mut(model, &mut |t| {
        let Some(raw) = t.raw_data.as_ref() else {
            return Ok(());
        };
        if is_external(t) {
            return Ok(());
        }
        let Some(src) = source_of(raw).filter(|s| s.mapping.kind() == MapKind::ExternalData) else {
            return Ok(());
        };
        let file = src.mapping.path();
        let location = match locations.get(file) {
            Some(location) => location.clone(),
            None => {
                let location = location_under(&canon_out, file, model_path)?;
                locations.insert(file.to_path_buf(), location.clone());
                location
            }
        };
        let len = raw.len() as u64;
        t.raw_data = None;
        t.data_location = Some(DataLocation::External as i32);
        t.external_data = vec![
            entry("location", &location),
            entry("offset", &src.offset.to_string()),
            entry("length", &len.to_string()),
        ];
        Ok(())
    })
}

/// `file`'s location relative to the canonical directory `canon_out`, `/`-separated.
fn location_under(canon_out: &Path, file: &Path, model_path: &Path) -> Result<String> {
    let outside = || Error::ReuseOutside {
        path: model_path.to_path_buf(),
        file: file.to_path_buf(),
    };
    let canon = file.canonicalize().map_err(io_err(file))?;
    let rel = canon.strip_prefix(canon_out).map_err(|_| outside())?;
    let parts: Option<Vec<&str>> = rel
        .components()
        .map(|c| match c {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect();
    match parts {
        Some(parts) if !parts.is_empty() => Ok(parts.join("/")),
        _ => Err(outside()),
    }
}

/// The files the model's external tensors refer to, as locations without `.` components.
pub(crate) fn referenced_locations(model: &ModelProto, model_path: &Path) -> BTreeSet<PathBuf> {
    let mut referenced = BTreeSet::new();
    // Tensor payloads are reference-counted `Bytes`, so the clone copies structure only.
    let mut model = model.clone();
    let _ = for_each_tensor_mut(&mut model, &mut |t| {
        if let Ok(Some(info)) = external_data_info(t, model_path) {
            referenced.insert(normal_location(&info.location));
        }
        Ok(())
    });
    referenced
}

/// Refuses a save that would write one of `writes` (locations relative to the output's
/// directory: the new data file, the model file) over one of the `referenced` files.
pub(crate) fn refuse_overwrite(
    referenced: &BTreeSet<PathBuf>,
    model_path: &Path,
    writes: &[&str],
) -> Result<()> {
    match writes
        .iter()
        .find(|w| referenced.contains(&normal_location(w)))
    {
        Some(location) => Err(Error::DataFileInUse {
            path: model_path.to_path_buf(),
            location: location.to_string(),
        }),
        None => Ok(()),
    }
}

/// A location without its `.` components, to compare with another.
fn normal_location(location: &str) -> PathBuf {
    Path::new(location)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

fn entry(k: &str, v: &str) -> StringStringEntryProto {
    StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    }
}
