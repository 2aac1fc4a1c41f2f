//! Raw file access under everything else: a whole file memory-mapped into `Bytes`, and a write
//! that goes through a temporary file and a rename. Layer: the bottom; imports only `error`
//! (`external` and `io` import it).

use std::io::Write;
use std::path::Path;

use bytes::Bytes;

use crate::error::{io_err, Error, Result};

/// Reads a whole file into a `Bytes` without copying: files are memory-mapped.
pub(crate) fn map_file(path: &Path) -> Result<Bytes> {
    let file = std::fs::File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the map is read-only; onnx-opt never writes to a file it has mapped (every write
    // goes to a temporary file that is renamed over the destination). A file changed by another
    // process while mapped is outside what any reader can guard against.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err(path))?;
    Ok(Bytes::from_owner(map))
}

/// Writes a file through a temporary file in the same directory and a rename, so that a
/// failure never leaves a partial file at `path`.
pub fn write_atomic(
    path: impl AsRef<Path>,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let path = path.as_ref();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".onnx-opt-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io_err(path))?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        write(&mut w).map_err(io_err(path))?;
        w.flush().map_err(io_err(path))?;
    }
    tmp.as_file().sync_all().map_err(io_err(path))?;
    tmp.persist(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(())
}
