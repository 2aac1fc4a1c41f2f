//! Loading and saving protobuf files: memory-mapped zero-copy decode, atomic writes, and the
//! save-time externalization of large tensors. Layer: above `file` and `external` (it imports
//! both); nothing in the crate imports it but `lib.rs`.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use prost::Message;

use crate::error::{Error, Result};
use crate::external::{self, ExternalDataOptions};
use crate::file::{map_file, write_atomic};
use crate::mapped::MapKind;
use crate::onnx::ModelProto;
use crate::stream::encode_streaming;

/// Protobuf's hard limit on one serialized message (2 GiB).
pub const PROTOBUF_LIMIT: u64 = (1 << 31) - 1;

/// A model as read from disk, with the directory its external data is relative to.
#[derive(Debug, Clone)]
pub struct LoadedModel {
    /// The decoded model; `raw_data` fields share the file's (memory-mapped) buffer.
    pub model: ModelProto,
    /// The file it came from.
    pub path: PathBuf,
    /// The directory external-data locations are resolved against.
    pub dir: PathBuf,
    /// Size of the file in bytes.
    pub file_size: u64,
    /// Bytes that decoding could not represent (fields unknown to the bundled schema or a
    /// non-canonical encoding): `file_size - encoded_len`. Zero for a lossless round trip.
    pub unrepresented_bytes: u64,
}

/// Loads a model file (memory-mapped; tensor bytes are not copied).
pub fn load_model(path: impl AsRef<Path>) -> Result<LoadedModel> {
    let path = path.as_ref();
    let bytes = map_file(path, MapKind::Message)?;
    if bytes.is_empty() {
        return Err(Error::Empty {
            path: path.to_path_buf(),
        });
    }
    load_model_bytes(bytes, path, model_dir(path))
}

/// Decodes a model from a buffer; `path` is used in messages, `dir` for external data.
pub fn load_model_bytes(bytes: Bytes, path: &Path, dir: PathBuf) -> Result<LoadedModel> {
    let file_size = bytes.len() as u64;
    let model = ModelProto::decode(bytes).map_err(|source| Error::Decode {
        path: path.to_path_buf(),
        message: "ModelProto",
        source,
    })?;
    let unrepresented_bytes = file_size.saturating_sub(model.encoded_len() as u64);
    Ok(LoadedModel {
        model,
        path: path.to_path_buf(),
        dir,
        file_size,
        unrepresented_bytes,
    })
}

/// Decodes any message (e.g. a test-data `TensorProto` or `SequenceProto`) from a file.
pub fn decode_file<M: Message + Default>(path: impl AsRef<Path>) -> Result<M> {
    let path = path.as_ref();
    let bytes = map_file(path, MapKind::Message)?;
    M::decode(bytes).map_err(|source| Error::Decode {
        path: path.to_path_buf(),
        message: std::any::type_name::<M>()
            .rsplit("::")
            .next()
            .unwrap_or("message"),
        source,
    })
}

/// Encodes any message to a file atomically.
pub fn encode_to_file<M: Message>(message: &M, path: impl AsRef<Path>) -> Result<()> {
    write_atomic(path, |w| encode_streaming(message, w).map(|_| ()))
}

/// How [`save_model`] writes tensor data.
#[derive(Debug, Clone, Default)]
pub struct SaveOptions {
    /// Externalize tensors at or above a size threshold into a data file beside the model.
    pub external: Option<ExternalDataOptions>,
    /// Refuse instead of externalizing automatically when the model would pass 2 GiB.
    pub no_auto_external: bool,
    /// The serialized size above which tensors are externalized automatically; `None` means
    /// protobuf's limit, [`PROTOBUF_LIMIT`]. Lower it to exercise the mechanism on small models.
    pub size_limit: Option<u64>,
    /// Tensors whose bytes are still those of an external-data file the input was read from
    /// (slices of a file [`inline_external_data`](crate::inline_external_data) mapped) keep
    /// referring to that file, at their offset, instead of being copied into the new data
    /// file; only the other tensors are externalized by `external`. Every such file must be
    /// inside the output's directory (refused otherwise, before anything is written, as is a
    /// new data file that would replace one of them); see [`check_external_reuse`].
    pub reuse_external_data: bool,
}

/// Saves a model. `source_dir` is where its existing external-data locations resolve (the
/// loaded model's directory); tensors stored there are carried over into the output.
///
/// A model whose serialized size would pass protobuf's 2 GiB limit is externalized
/// automatically (tensors of 1 KiB and above), unless `no_auto_external` is set. Tensor bytes
/// that are slices of a memory-mapped file are copied to the data file by the kernel where it
/// can (`copy_file_range(2)`), else written from memory. Every refusal comes before the first
/// file is written; the data file and then the model are each written through a temporary file
/// and a rename.
pub fn save_model(
    model: &ModelProto,
    source_dir: Option<&Path>,
    path: impl AsRef<Path>,
    options: &SaveOptions,
) -> Result<()> {
    let path = path.as_ref();
    let out_dir = model_dir(path);
    let limit = options
        .size_limit
        .unwrap_or(PROTOBUF_LIMIT)
        .min(PROTOBUF_LIMIT);
    let mut ext = options.external.clone();
    let reuse = options.reuse_external_data;
    let has_external = external::any_external(model);
    let same_dir = match source_dir {
        Some(src) => same_directory(src, &out_dir),
        None => true,
    };
    let carry_external = has_external && !same_dir;
    if ext.is_none() && !carry_external && !reuse && (model.encoded_len() as u64) <= limit {
        return encode_to_file(model, path);
    }
    let mut model = model.clone();
    if carry_external {
        // The output lives elsewhere: bring external tensors in, then externalize them again
        // (the input had them external, so the output keeps them external).
        let src = source_dir.unwrap_or(Path::new("."));
        external::inline_external_data(&mut model, src, path)?;
        if ext.is_none() {
            ext = Some(ExternalDataOptions::for_model(path, 1024));
        }
    }
    if reuse {
        external::refer_to_mapped_data(&mut model, &out_dir, path)?;
    }
    if ext.is_none() && (model.encoded_len() as u64) > limit {
        if options.no_auto_external {
            return Err(Error::TooLarge {
                path: path.to_path_buf(),
                size: model.encoded_len() as u64,
            });
        }
        ext = Some(ExternalDataOptions::for_model(path, 1024));
    }
    // What the output refers to before the new data file is planned (the tensors left where
    // they were, and those pointed back at the input's files).
    let referenced = external::referenced_locations(&model, path);
    let (chunks, data_location) = match &ext {
        Some(ext) => (
            external::move_to_data_file(&mut model, ext)?,
            ext.location.as_str(),
        ),
        None => (Vec::new(), ""),
    };
    let model_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut writes = vec![model_name.as_str()];
    if !chunks.is_empty() {
        writes.push(data_location);
    }
    external::refuse_overwrite(&referenced, path, &writes)?;
    let size = model.encoded_len() as u64;
    if size > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            size,
        });
    }
    if !chunks.is_empty() {
        external::write_data_file(&out_dir.join(data_location), &chunks)?;
    }
    encode_to_file(&model, path)
}

/// Checks before long work what saving `model` to `path` with
/// [`reuse_external_data`](SaveOptions::reuse_external_data) will check: that every external-data
/// file the model's tensors are still slices of is inside `path`'s directory (refused, naming
/// the first file that is not). `model` is a model whose external data was loaded with
/// [`inline_external_data`](crate::inline_external_data).
pub fn check_external_reuse(model: &ModelProto, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    // Tensor payloads are reference-counted `Bytes`, so the clone copies structure only.
    external::refer_to_mapped_data(&mut model.clone(), &model_dir(path), path)
}

/// The directory a model file's external-data locations are relative to.
fn model_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn same_directory(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
