//! Reading models in either form a user has them: the binary protobuf (`.onnx`) or the ONNX text
//! syntax (as `onnx.printer` writes and `onnx.parser` reads). Every command and the library's
//! [`load`](crate::load) go through [`load_proto`], so a text model is accepted everywhere a
//! binary one is.

use std::path::{Path, PathBuf};

use onnx_ir::Model;
use onnx_proto::{LoadedModel, ModelProto};

use crate::Error;

/// Whether a file holds the text syntax: by its extension (`.onnxtxt`, `.txt`), or by its first
/// non-blank byte being `<` (a text model opens with its `<ir_version: ..>` header; the byte
/// `<` can never start a valid binary ModelProto, as it would be an end-group tag).
pub fn is_text_model(path: &Path, head: &[u8]) -> bool {
    let by_ext = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("onnxtxt") || e.eq_ignore_ascii_case("txt"));
    by_ext
        || head
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'<')
}

/// Parses a model from the ONNX text syntax; `origin` names the source in errors.
pub fn parse_text_model(text: &str, origin: &Path) -> Result<ModelProto, Error> {
    onnx_text::parse_model(text).map_err(|e| Error::Text {
        path: origin.to_path_buf(),
        error: Box::new(e),
    })
}

/// Loads a model file in either form. A binary file is memory-mapped (its external data stays
/// external until [`load_ir`] maps it in); a text file is parsed.
pub fn load_proto(path: &Path) -> Result<LoadedModel, Error> {
    let head = read_head(path)?;
    if !is_text_model(path, &head) {
        return Ok(onnx_proto::load_model(path)?);
    }
    let bytes = std::fs::read(path).map_err(|source| onnx_proto::Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|e| Error::Run {
        path: path.to_path_buf(),
        message: format!(
            "not UTF-8 at byte {}: a text model must be UTF-8 (a binary model must not start with '<')",
            e.utf8_error().valid_up_to()
        ),
    })?;
    let model = parse_text_model(&text, path)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok(LoadedModel {
        model,
        path: path.to_path_buf(),
        dir,
        file_size: text.len() as u64,
        unrepresented_bytes: 0,
    })
}

fn read_head(path: &Path) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|source| onnx_proto::Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut head = Vec::with_capacity(256);
    file.take(256)
        .read_to_end(&mut head)
        .map_err(|source| onnx_proto::Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(head)
}

/// Writes a model where `path` says: the text syntax for a `.onnxtxt`/`.txt` path (tensors
/// inline; external data options do not apply), else the binary protobuf with
/// [`onnx_proto::save_model`]. Both go through a temporary file in the same directory and a
/// rename, so a failure never leaves a half-written file.
pub fn save_proto(
    proto: &ModelProto,
    dir: Option<&Path>,
    path: &Path,
    options: &onnx_proto::SaveOptions,
) -> Result<(), onnx_proto::Error> {
    let text = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("onnxtxt") || e.eq_ignore_ascii_case("txt"));
    if !text {
        return onnx_proto::save_model(proto, dir, path, options);
    }
    let io = |source| onnx_proto::Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut printed = onnx_text::print_model(proto, &onnx_text::PrintOptions::default());
    printed.push('\n');
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        name.unwrap_or_default(),
        std::process::id()
    ));
    std::fs::write(&tmp, printed).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// A model loaded for optimization.
pub struct Loaded {
    /// The proto, with external data mapped in as `raw_data`.
    pub proto: onnx_proto::LoadedModel,
    /// The IR of the model.
    pub model: Model,
    /// Whether the file stored any tensor externally.
    pub had_external: bool,
}

/// Loads a model file into the IR, with external data mapped in; returns the proto too.
pub fn load_ir(path: &Path) -> Result<Loaded, Error> {
    into_ir(load_proto(path)?, path)
}

/// Maps a loaded proto's external data in and builds its IR.
fn into_ir(mut loaded: onnx_proto::LoadedModel, origin: &Path) -> Result<Loaded, Error> {
    let had_external = onnx_proto::any_external(&loaded.model);
    let (dir, p) = (loaded.dir.clone(), loaded.path.clone());
    onnx_proto::inline_external_data(&mut loaded.model, &dir, &p)?;
    let model = Model::from_proto(loaded.model.clone()).map_err(|source| Error::Ir {
        path: origin.to_path_buf(),
        source,
    })?;
    Ok(Loaded {
        proto: loaded,
        model,
        had_external,
    })
}

/// Loads a model held in memory (the binary protobuf, or the text syntax when it starts with
/// `<`) into the IR; `origin` names it in messages, and external data is read relative to
/// `dir` (refused, naming the tensor, when `dir` is `None` and the model has external data).
pub fn load_ir_bytes(
    bytes: bytes::Bytes,
    origin: &Path,
    dir: Option<&Path>,
) -> Result<Loaded, Error> {
    let loaded = if is_text_model(origin, &bytes[..bytes.len().min(256)]) {
        let text = std::str::from_utf8(&bytes).map_err(|e| Error::Run {
            path: origin.to_path_buf(),
            message: format!(
                "not UTF-8 at byte {}: a text model must be UTF-8 (a binary model must not start with '<')",
                e.valid_up_to()
            ),
        })?;
        onnx_proto::LoadedModel {
            model: parse_text_model(text, origin)?,
            path: origin.to_path_buf(),
            dir: dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf),
            file_size: bytes.len() as u64,
            unrepresented_bytes: 0,
        }
    } else {
        if bytes.is_empty() {
            return Err(onnx_proto::Error::Empty {
                path: origin.to_path_buf(),
            }
            .into());
        }
        let dir = dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        onnx_proto::load_model_bytes(bytes, origin, dir)?
    };
    if dir.is_none() && onnx_proto::any_external(&loaded.model) {
        return Err(Error::Run {
            path: origin.to_path_buf(),
            message: "the model stores tensors in external data files, and no directory was given to read them from (pass the model's path instead)".into(),
        });
    }
    into_ir(loaded, origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_told_apart_from_binary() {
        assert!(is_text_model(Path::new("m.onnxtxt"), b"\x08\x07"));
        assert!(is_text_model(Path::new("m.onnx"), b"  \n<ir_version: 8>"));
        assert!(!is_text_model(Path::new("m.onnx"), b"\x08\x07\x12"));
        assert!(!is_text_model(Path::new("m.onnx"), b""));
    }
}
