//! Streaming protobuf encoding: a `BufMut` that writes through to an `io::Write` in small
//! chunks, so saving a model never holds a second copy of it in memory. Large byte fields
//! (tensor `raw_data`) go straight from their buffer to the writer.

use std::io::Write;
use std::mem::MaybeUninit;

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut};
use prost::Message;

/// Size of the staging buffer; slices at least this long bypass it.
const CHUNK: usize = 64 * 1024;

/// A `BufMut` over a writer. prost's encoders cannot report I/O errors, so the first error is
/// kept, later writes are dropped, and [`encode_streaming`] returns it.
struct StreamBuf<'w> {
    out: &'w mut dyn Write,
    buf: Vec<u8>,
    written: usize,
    error: Option<std::io::Error>,
}

impl StreamBuf<'_> {
    fn flush_buf(&mut self) {
        if self.error.is_none() && !self.buf.is_empty() {
            if let Err(e) = self.out.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.written += self.buf.len();
        self.buf.clear();
    }

    fn write_direct(&mut self, src: &[u8]) {
        self.flush_buf();
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(src) {
                self.error = Some(e);
            }
        }
        self.written += src.len();
    }
}

// SAFETY: `chunk_mut` hands out only the spare capacity of `buf`, and `advance_mut` is called
// by the caller after initializing `cnt <= chunk_mut().len()` bytes of it, which is exactly
// the contract `Vec::set_len` needs.
unsafe impl BufMut for StreamBuf<'_> {
    fn remaining_mut(&self) -> usize {
        usize::MAX - self.written - self.buf.len()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        let len = self.buf.len();
        assert!(
            cnt <= self.buf.capacity() - len,
            "advance_mut past the staging buffer"
        );
        // SAFETY: see the impl comment; bounds checked above.
        unsafe { self.buf.set_len(len + cnt) };
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        if self.buf.len() == self.buf.capacity() {
            self.flush_buf();
        }
        let spare: &mut [MaybeUninit<u8>] = self.buf.spare_capacity_mut();
        UninitSlice::uninit(spare)
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= CHUNK {
            self.write_direct(src);
        } else {
            if self.buf.capacity() - self.buf.len() < src.len() {
                self.flush_buf();
            }
            self.buf.extend_from_slice(src);
        }
    }

    fn put<T: Buf>(&mut self, mut src: T)
    where
        Self: Sized,
    {
        while src.has_remaining() {
            let chunk = src.chunk();
            let n = chunk.len();
            self.put_slice(chunk);
            src.advance(n);
        }
    }
}

/// Encodes `message` into `out` without building the whole encoding in memory. Returns the
/// number of bytes written.
pub fn encode_streaming<M: Message>(message: &M, out: &mut dyn Write) -> std::io::Result<usize> {
    let mut sink = StreamBuf {
        out,
        buf: Vec::with_capacity(CHUNK),
        written: 0,
        error: None,
    };
    message.encode_raw(&mut sink);
    sink.flush_buf();
    match sink.error {
        Some(e) => Err(e),
        None => Ok(sink.written),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::{GraphProto, ModelProto, TensorProto};
    use bytes::Bytes;

    fn model_with(sizes: &[usize]) -> ModelProto {
        let initializer = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| TensorProto {
                name: Some(format!("t{i}")),
                data_type: Some(2),
                dims: vec![n as i64],
                raw_data: Some(Bytes::from(
                    (0..n).map(|k| (k * 7 + i) as u8).collect::<Vec<_>>(),
                )),
                ..Default::default()
            })
            .collect();
        ModelProto {
            ir_version: Some(8),
            producer_name: Some("stream-test".into()),
            graph: Some(GraphProto {
                name: Some("g".into()),
                initializer,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn streaming_matches_encode_to_vec() {
        for sizes in [
            vec![],
            vec![3],
            vec![CHUNK - 1, 5, CHUNK, CHUNK * 3 + 17, 0],
        ] {
            let m = model_with(&sizes);
            let mut out = Vec::new();
            let n = encode_streaming(&m, &mut out).expect("writing to a Vec cannot fail");
            assert_eq!(out, m.encode_to_vec());
            assert_eq!(n, out.len());
        }
    }

    struct FailAfter(usize);
    impl Write for FailAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 < buf.len() {
                return Err(std::io::Error::other("disk full"));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_error_is_returned() {
        let m = model_with(&[CHUNK * 2]);
        let err = encode_streaming(&m, &mut FailAfter(100)).expect_err("the writer fails");
        assert_eq!(err.to_string(), "disk full");
    }
}
