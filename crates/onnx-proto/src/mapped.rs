//! Provenance of memory-mapped bytes: every file [`map_file`](crate::file::map_file) maps is
//! registered here while its mapping lives, so that a `Bytes` handed back at save time can be
//! traced to the file and offset it was read from. The writer then copies it file to file in
//! the kernel, and `reuse_external_data` points a tensor at the file it came from. Layer: the
//! bottom, beside `error`; it imports nothing of the crate.
//!
//! # Why a lookup by address is sound
//!
//! The registry holds, per live mapping, its address range and a `Weak` reference to the
//! [`Mapping`] that owns it (the owner of every `Bytes` cut from it). [`source_of`] answers only
//! when that `Weak` upgrades, and the answer holds the resulting `Arc` (so the mapping, and the
//! open file it was made from, stay alive while the answer is used):
//!
//! 1. An upgrade succeeds only while the mapping has not started to drop: the strong count never
//!    comes back from zero, and the unmap runs after it reached zero. So the range registered
//!    beside a `Weak` that upgraded is mapped now, by that mapping, for as long as the answer is
//!    held. A registry entry is removed in `Mapping::drop`, before the unmap, so entries do not
//!    pile up; soundness does not rest on the removal (a stale entry does not upgrade).
//! 2. The caller's `Bytes` is alive, so its bytes are valid memory while the caller holds it.
//!    Two live memory objects never share an address, so a live `Bytes` whose range lies inside
//!    a live mapping's range is that mapping's memory, whatever owner the `Bytes` records.
//! 3. The mapping is read-only and shared (`MAP_SHARED`) over the file it keeps open, so its
//!    bytes are the file's bytes at the same offset: both are the page cache of one inode. This
//!    holds even when the path has since been renamed over (the open file is the old inode).
//!    Another process writing the file while it is mapped changes both views alike; truncating
//!    it is outside what any reader of a mapped file can guard against (see `map_file`).
//!
//! The path recorded is the one the file was opened by, which is what `reuse_external_data`
//! writes into the output; it is the same file only as long as nobody replaces it, which is why
//! the save refuses to write over a data file the output still refers to.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Bytes;

/// What a mapped file is to the model that read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapKind {
    /// A protobuf file: a model, or a test-data message.
    Message,
    /// An external-data file of a model (the only kind `reuse_external_data` points at).
    ExternalData,
}

/// A whole file mapped read-only, with the file kept open: the owner of the `Bytes` that
/// `map_file` returns.
pub(crate) struct Mapping {
    map: memmap2::Mmap,
    file: File,
    path: PathBuf,
    kind: MapKind,
}

impl Mapping {
    /// The open file the mapping was made from.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// The path the file was opened by.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn kind(&self) -> MapKind {
        self.kind
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // Runs before the `map` field unmaps; see the module header, point 1.
        let base = self.map.as_ptr() as usize;
        let mut reg = registry();
        if reg
            .get(&base)
            .is_some_and(|e| std::ptr::eq(e.mapping.as_ptr(), self))
        {
            reg.remove(&base);
        }
    }
}

/// The `Bytes` owner: shares the mapping with the registry's `Weak`.
struct Owner(Arc<Mapping>);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.0.map
    }
}

struct Entry {
    len: usize,
    mapping: Weak<Mapping>,
}

/// Live mappings by base address.
static REGISTRY: Mutex<BTreeMap<usize, Entry>> = Mutex::new(BTreeMap::new());

fn registry() -> MutexGuard<'static, BTreeMap<usize, Entry>> {
    // The map is consistent after every statement, so a panic elsewhere leaves it usable.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wraps a fresh mapping of `file` into `Bytes` and registers it.
pub(crate) fn register(map: memmap2::Mmap, file: File, path: &Path, kind: MapKind) -> Bytes {
    let base = map.as_ptr() as usize;
    let len = map.len();
    let mapping = Arc::new(Mapping {
        map,
        file,
        path: path.to_path_buf(),
        kind,
    });
    registry().insert(
        base,
        Entry {
            len,
            mapping: Arc::downgrade(&mapping),
        },
    );
    Bytes::from_owner(Owner(mapping))
}

/// Where a `Bytes` was read from: a live mapping and the offset of the first byte in its file.
pub(crate) struct Source {
    pub(crate) mapping: Arc<Mapping>,
    pub(crate) offset: u64,
}

/// The mapped file and offset `data` is a slice of, when it is one (never for empty data).
pub(crate) fn source_of(data: &Bytes) -> Option<Source> {
    if data.is_empty() {
        return None;
    }
    let start = data.as_ptr() as usize;
    let end = start.checked_add(data.len())?;
    let (base, weak) = {
        let reg = registry();
        let (&base, entry) = reg.range(..=start).next_back()?;
        if end > base + entry.len {
            return None;
        }
        (base, entry.mapping.clone())
    };
    // Upgraded after the lock is released: dropping the last `Arc` locks it again.
    let mapping = weak.upgrade()?;
    Some(Source {
        mapping,
        offset: (start - base) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn mapped(content: &[u8]) -> (tempfile::NamedTempFile, Bytes) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content).unwrap();
        f.flush().unwrap();
        let file = File::open(f.path()).unwrap();
        // SAFETY: a private temporary file nobody writes while it is mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        let bytes = register(map, file, f.path(), MapKind::ExternalData);
        (f, bytes)
    }

    #[test]
    fn slices_of_a_mapping_are_traced_to_their_offset() {
        let (f, bytes) = mapped(&[7u8; 10_000]);
        let s = source_of(&bytes.slice(123..4567)).expect("a slice of a live mapping");
        assert_eq!(s.offset, 123);
        assert_eq!(s.mapping.path(), f.path());
        assert_eq!(s.mapping.kind(), MapKind::ExternalData);
        assert!(source_of(&bytes.slice(5..5)).is_none(), "empty");
        let copy = Bytes::copy_from_slice(&bytes[..100]);
        assert!(source_of(&copy).is_none(), "a heap copy has no file");
    }

    #[test]
    fn a_dropped_mapping_is_forgotten() {
        let (_f, bytes) = mapped(&[1u8; 4096]);
        let slice = bytes.slice(10..20);
        drop(bytes);
        let weak = Arc::downgrade(&source_of(&slice).expect("a slice keeps it alive").mapping);
        drop(slice);
        assert!(
            weak.upgrade().is_none(),
            "the last Bytes took the mapping with it"
        );
        assert!(!registry().values().any(|e| e.mapping.ptr_eq(&weak)));
    }
}
