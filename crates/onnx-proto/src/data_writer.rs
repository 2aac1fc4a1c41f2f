//! Writing an external-data file from a sequence of chunks, in order: bytes in memory go
//! through a buffer; bytes that are a slice of a memory-mapped file (`mapped::source_of`) are
//! copied file to file by the kernel with `copy_file_range(2)` (no page faults, no copy through
//! user space; a reflink on btrfs and xfs), falling back to the buffered write when the kernel
//! says it cannot (another file system, an old kernel). Layer: above `mapped`; `external`
//! imports it.

use std::fs::File;
use std::io::{BufWriter, Write};

use bytes::Bytes;

use crate::mapped::source_of;

/// Chunks shorter than this are written from memory: a flush and a system call cost more than
/// copying them.
pub(crate) const KERNEL_COPY_MIN: usize = 64 * 1024;

/// What a [`DataWriter`] did, for tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WriteStats {
    /// Bytes the kernel copied file to file.
    pub(crate) copied: u64,
    /// Bytes written from memory.
    pub(crate) written: u64,
    /// The error number of the last kernel copy refused as unsupported (its bytes were then
    /// written from memory).
    pub(crate) unsupported: Option<i32>,
}

/// Writes chunks at the position of a file, in order.
pub(crate) struct DataWriter<'f> {
    out: BufWriter<&'f File>,
    stats: WriteStats,
}

impl<'f> DataWriter<'f> {
    pub(crate) fn new(file: &'f File) -> Self {
        DataWriter {
            out: BufWriter::with_capacity(256 * 1024, file),
            stats: WriteStats::default(),
        }
    }

    /// Writes `n` zero bytes (the padding that aligns the next tensor).
    pub(crate) fn write_zeros(&mut self, n: usize) -> std::io::Result<()> {
        const ZEROS: [u8; 4096] = [0; 4096];
        let mut left = n;
        while left > 0 {
            let k = left.min(ZEROS.len());
            self.out.write_all(&ZEROS[..k])?;
            left -= k;
        }
        self.stats.written += n as u64;
        Ok(())
    }

    /// Writes `data`: copied in the kernel from the file it was mapped from, when it was.
    pub(crate) fn write_bytes(&mut self, data: &Bytes) -> std::io::Result<()> {
        let mut rest: &[u8] = data;
        if data.len() >= KERNEL_COPY_MIN {
            if let Some(src) = source_of(data) {
                // The kernel writes at the file's position: what the buffer holds goes first.
                self.out.flush()?;
                let done = kernel_copy(src.mapping.file(), src.offset, self.out.get_ref(), rest)?;
                self.stats.copied += done.bytes as u64;
                if done.unsupported.is_some() {
                    self.stats.unsupported = done.unsupported;
                }
                rest = &rest[done.bytes..];
            }
        }
        self.out.write_all(rest)?;
        self.stats.written += rest.len() as u64;
        Ok(())
    }

    /// Flushes the buffer; the caller syncs the file.
    pub(crate) fn finish(mut self) -> std::io::Result<WriteStats> {
        self.out.flush()?;
        Ok(self.stats)
    }
}

/// How far a kernel copy went.
struct Copied {
    /// Bytes copied; the output file's position advanced by as many.
    bytes: usize,
    /// Set when the kernel refused the rest as unsupported.
    unsupported: Option<i32>,
}

/// Copies `data.len()` bytes of `src` from `offset` to the position of `out` with
/// `copy_file_range(2)`, for as long as the kernel accepts; `data` is the same bytes, mapped
/// (see `mapped`'s header for why they are equal), and only its length is used here.
///
/// Returns how many bytes were copied: all of them, or fewer when the kernel refused as
/// unsupported (`EXDEV`: another file system; `ENOSYS`: an old kernel; `EOPNOTSUPP`,
/// `EINVAL`: a file system or a file that cannot) or the source ended early; the caller writes
/// the rest from memory. Any other error is an error of the write.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn kernel_copy(src: &File, offset: u64, out: &File, data: &[u8]) -> std::io::Result<Copied> {
    use std::os::fd::AsRawFd;

    let len = data.len();
    let unsupported = |errno| {
        Ok(Copied {
            bytes: 0,
            unsupported: Some(errno),
        })
    };
    let Ok(mut off_in) = libc::loff_t::try_from(offset) else {
        return unsupported(libc::EINVAL);
    };
    let mut done = 0usize;
    while done < len {
        // The raw system call rather than glibc's wrapper, which exists only from glibc 2.27.
        // SAFETY: both descriptors belong to `File`s borrowed for the whole call; `off_in`
        // points at a live `loff_t` the kernel reads and advances; a null `off_out` makes the
        // kernel use and advance `out`'s own position; the flags must be 0. The kernel writes
        // no memory of ours but `off_in`.
        let n = unsafe {
            libc::syscall(
                libc::SYS_copy_file_range,
                src.as_raw_fd() as libc::c_long,
                &mut off_in as *mut libc::loff_t,
                out.as_raw_fd() as libc::c_long,
                std::ptr::null_mut::<libc::loff_t>(),
                (len - done) as libc::size_t,
                0 as libc::c_uint,
            )
        };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(e @ (libc::EXDEV | libc::ENOSYS | libc::EOPNOTSUPP | libc::EINVAL)) => {
                    return Ok(Copied {
                        bytes: done,
                        unsupported: Some(e),
                    });
                }
                _ => return Err(err),
            }
        }
        if n == 0 {
            // The file is shorter than its mapping was: the rest is written from memory.
            break;
        }
        // A short copy is not an error: go on from where it stopped.
        done += n as usize;
    }
    Ok(Copied {
        bytes: done,
        unsupported: None,
    })
}

/// Without `copy_file_range(2)` every chunk is written from memory.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn kernel_copy(_src: &File, _offset: u64, _out: &File, _data: &[u8]) -> std::io::Result<Copied> {
    Ok(Copied {
        bytes: 0,
        unsupported: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::{map_file, write_atomic_file};
    use crate::mapped::MapKind;

    fn pattern(n: usize, seed: usize) -> Vec<u8> {
        (0..n).map(|i| ((i * 31 + seed) % 251) as u8).collect()
    }

    /// Writes `chunks` (zeros for `None`) to `path` and returns the stats.
    fn write(path: &std::path::Path, chunks: &[Option<Bytes>], pad: usize) -> WriteStats {
        write_atomic_file(path, |f| {
            let mut w = DataWriter::new(f);
            for c in chunks {
                match c {
                    Some(b) => w.write_bytes(b)?,
                    None => w.write_zeros(pad)?,
                }
            }
            w.finish()
        })
        .unwrap()
    }

    #[test]
    fn mapped_and_memory_chunks_interleave_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let src_path = dir.path().join("src.bin");
        let content = pattern(3 * KERNEL_COPY_MIN + 1234, 5);
        std::fs::write(&src_path, &content).unwrap();
        let src = map_file(&src_path, MapKind::ExternalData).unwrap();
        // Not page-aligned in the source, and one shorter than the kernel-copy minimum.
        let a = src.slice(17..17 + KERNEL_COPY_MIN + 99);
        let b = src.slice(KERNEL_COPY_MIN * 2 + 3..);
        let small = src.slice(1..1001);
        let heap = Bytes::from(pattern(KERNEL_COPY_MIN * 2, 9));
        let chunks = [
            Some(Bytes::from_static(b"header")),
            Some(a.clone()),
            None,
            Some(small.clone()),
            Some(heap.clone()),
            Some(b.clone()),
            None,
        ];
        let out = dir.path().join("out.bin");
        let stats = write(&out, &chunks, 333);
        let mut expected = b"header".to_vec();
        for part in [&a[..], &[0; 333], &small[..], &heap[..], &b[..], &[0; 333]] {
            expected.extend_from_slice(part);
        }
        assert_eq!(std::fs::read(&out).unwrap(), expected);
        assert_eq!(stats.copied + stats.written, expected.len() as u64);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        assert_eq!(
            (stats.copied, stats.unsupported),
            ((a.len() + b.len()) as u64, None),
            "the mapped chunks are copied in the kernel (source and output share a directory)"
        );
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_source_shorter_than_its_slice_is_finished_from_memory() {
        let dir = tempfile::tempdir().unwrap();
        let (src_path, out_path) = (dir.path().join("src.bin"), dir.path().join("out.bin"));
        let content = pattern(KERNEL_COPY_MIN + 10, 1);
        std::fs::write(&src_path, &content).unwrap();
        let src = std::fs::File::open(&src_path).unwrap();
        let out = std::fs::File::create(&out_path).unwrap();
        // The bytes in memory are longer than what the file holds past the offset.
        let data = pattern(KERNEL_COPY_MIN, 1);
        let done = kernel_copy(&src, 20, &out, &data).unwrap();
        assert_eq!((done.bytes, done.unsupported), (KERNEL_COPY_MIN - 10, None));
        assert_eq!(std::fs::read(&out_path).unwrap(), content[20..]);
    }
}
