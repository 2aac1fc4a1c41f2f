//! Raw file access under everything else: a whole file memory-mapped into `Bytes` (and
//! registered in `mapped`, so that its slices can be traced back to it), and a write that goes
//! through a temporary file and a rename. Layer: above `error` and `mapped`; `data_writer`'s
//! tests, `external` and `io` import it.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use bytes::Bytes;

use crate::error::{io_err, Error, Result};
use crate::mapped::{register, MapKind};

/// Reads a whole file into a `Bytes` without copying: files are memory-mapped, and the mapping
/// is registered as a mapping of `path` of this `kind` for as long as a slice of it lives.
pub(crate) fn map_file(path: &Path, kind: MapKind) -> Result<Bytes> {
    let file = File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the map is read-only; onnx-opt never writes to a file it has mapped (every write
    // goes to a temporary file that is renamed over the destination). A file changed by another
    // process while mapped is outside what any reader can guard against.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err(path))?;
    Ok(register(map, file, path, kind))
}

/// Writes a file through a temporary file in the same directory and a rename, so that a
/// failure never leaves a partial file at `path`.
pub fn write_atomic(
    path: impl AsRef<Path>,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    write_atomic_file(path.as_ref(), |file| {
        let mut w = std::io::BufWriter::new(file);
        write(&mut w)?;
        w.flush()
    })
}

/// [`write_atomic`] handing the temporary file itself to `write` (which writes from its
/// start), for writers that need its descriptor; the file is synced before the rename.
pub(crate) fn write_atomic_file<T>(
    path: &Path,
    write: impl FnOnce(&File) -> std::io::Result<T>,
) -> Result<T> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".onnx-opt-").suffix(".tmp");
    // The file gets the mode a newly created file gets (0666 less the umask), as a plain
    // write would give it, not the temporary file's private 0600.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let tmp = builder.tempfile_in(dir).map_err(io_err(path))?;
    let out = write(tmp.as_file()).map_err(io_err(path))?;
    tmp.as_file().sync_all().map_err(io_err(path))?;
    tmp.persist(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(out)
}
