//! ImageDecoder: decodes an encoded image (PNG, JPEG, BMP, TIFF, WebP, PNM through the `image`
//! crate) into an `[H, W, C]` uint8 tensor in RGB, BGR or grayscale. JPEG 2000 is not supported
//! by the `image` crate and gives an error. Grayscale uses the ITU-R 601-2 luma with Pillow's
//! fixed-point rounding (`L = (19595 R + 38470 G + 7471 B + 2^15) >> 16`), as the reference
//! implementation and the test data do.

use image::{ColorType, DynamicImage, ImageFormat};

use super::one;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::Tensor;
use crate::value::Value;

/// Registers this family's kernels.
pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "ImageDecoder", 20, LATEST, image_decoder);
}

/// The output channel layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PixelFormat {
    Rgb,
    Bgr,
    Grayscale,
}

/// Pillow's "L" conversion of an RGB pixel.
fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((19595 * r as u32 + 38470 * g as u32 + 7471 * b as u32 + 0x8000) >> 16) as u8
}

/// True when `bytes` start like a JPEG 2000 codestream or JP2 file.
fn is_jpeg2000(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0x4F, 0xFF, 0x51])
        || bytes.starts_with(&[0, 0, 0, 0x0C, b'j', b'P', b' ', b' '])
}

/// Why an encoded stream gives no image; the kernel attaches its node.
#[derive(Debug, thiserror::Error)]
enum DecodeError {
    /// A JPEG 2000 stream, which the `image` crate cannot read.
    #[error("JPEG 2000 images are not supported")]
    Jpeg2000,
    /// The bytes start like no format the `image` crate knows.
    #[error("unrecognized image format: {source}")]
    UnknownFormat { source: image::ImageError },
    /// A known format this kernel does not decode (only PNG, JPEG, BMP, TIFF, WebP, PNM).
    #[error("{format:?} images are not supported")]
    UnsupportedFormat { format: ImageFormat },
    /// The stream has a supported format but is malformed or truncated.
    #[error("cannot decode {format:?} image: {source}")]
    Malformed {
        format: ImageFormat,
        source: image::ImageError,
    },
}

fn decode(bytes: &[u8]) -> std::result::Result<DynamicImage, DecodeError> {
    if is_jpeg2000(bytes) {
        return Err(DecodeError::Jpeg2000);
    }
    let format =
        image::guess_format(bytes).map_err(|source| DecodeError::UnknownFormat { source })?;
    if !matches!(
        format,
        ImageFormat::Png
            | ImageFormat::Jpeg
            | ImageFormat::Bmp
            | ImageFormat::Tiff
            | ImageFormat::WebP
            | ImageFormat::Pnm
    ) {
        return Err(DecodeError::UnsupportedFormat { format });
    }
    image::load_from_memory_with_format(bytes, format)
        .map_err(|source| DecodeError::Malformed { format, source })
}

fn image_decoder(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let input = ctx.input(inputs, 0)?;
    let Tensor::U8(encoded) = input else {
        return Err(ctx.err(format!(
            "encoded_stream must be uint8, got {}",
            input.dtype()
        )));
    };
    if encoded.ndim() != 1 {
        return Err(ctx.err(format!(
            "encoded_stream must be 1-D, got shape {:?}",
            encoded.shape()
        )));
    }
    let format = match ctx.attr_string("pixel_format", "RGB")?.as_str() {
        "RGB" => PixelFormat::Rgb,
        "BGR" => PixelFormat::Bgr,
        "Grayscale" => PixelFormat::Grayscale,
        other => {
            return Err(ctx.err(format!(
                "pixel_format must be RGB, BGR or Grayscale, got '{other}'"
            )))
        }
    };
    let bytes: Vec<u8> = encoded.iter().copied().collect();
    let img = decode(&bytes).map_err(|e| ctx.err(e))?;
    let (w, h) = (img.width() as usize, img.height() as usize);
    let gray_source = matches!(
        img.color(),
        ColorType::L8 | ColorType::L16 | ColorType::La8 | ColorType::La16
    );
    let (channels, data) = match format {
        PixelFormat::Grayscale if gray_source => (1, img.to_luma8().into_raw()),
        PixelFormat::Grayscale => {
            let rgb = img.to_rgb8();
            (
                1,
                rgb.pixels().map(|p| luma(p.0[0], p.0[1], p.0[2])).collect(),
            )
        }
        PixelFormat::Rgb => (3, img.to_rgb8().into_raw()),
        PixelFormat::Bgr => {
            let mut raw = img.to_rgb8().into_raw();
            for px in raw.chunks_exact_mut(3) {
                px.swap(0, 2);
            }
            (3, raw)
        }
    };
    one(Tensor::from_vec(&[h, w, channels], data)?)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use onnx_proto::{AttributeProto, NodeProto};

    use super::*;
    use crate::error::RefError;
    use crate::eval::eval_node;

    fn node(pixel_format: &str) -> NodeProto {
        NodeProto {
            op_type: Some("ImageDecoder".into()),
            input: vec!["x".into()],
            output: vec!["y".into()],
            attribute: vec![AttributeProto {
                name: Some("pixel_format".into()),
                s: Some(pixel_format.as_bytes().to_vec().into()),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn run(pixel_format: &str, bytes: Vec<u8>) -> Result<Vec<Value>> {
        let t = Tensor::from_vec(&[bytes.len()], bytes)?;
        eval_node(&node(pixel_format), 20, &[Some(Value::Tensor(t))])
    }

    fn png_2x1() -> Vec<u8> {
        let img = image::RgbImage::from_raw(2, 1, vec![255, 0, 0, 10, 20, 30])
            .unwrap_or_else(|| panic!("buffer size"));
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, ImageFormat::Png)
            .unwrap_or_else(|e| panic!("{e}"));
        out.into_inner()
    }

    fn bytes_of(v: &Value) -> (Vec<usize>, Vec<u8>) {
        let t = v.as_tensor().unwrap_or_else(|e| panic!("{e}"));
        let a = t.as_array::<u8>().unwrap_or_else(|| panic!("not uint8"));
        (a.shape().to_vec(), a.iter().copied().collect())
    }

    #[test]
    fn png_in_every_pixel_format() {
        let rgb = run("RGB", png_2x1()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            bytes_of(&rgb[0]),
            (vec![1, 2, 3], vec![255, 0, 0, 10, 20, 30])
        );
        let bgr = run("BGR", png_2x1()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bytes_of(&bgr[0]).1, vec![0, 0, 255, 30, 20, 10]);
        let gray = run("Grayscale", png_2x1()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bytes_of(&gray[0]), (vec![1, 2, 1], vec![76, 18]));
    }

    #[test]
    fn undecodable_inputs_are_errors() {
        let r = run("RGB", vec![1, 2, 3, 4]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("format")));
        let mut truncated = png_2x1();
        truncated.truncate(30);
        let r = run("RGB", truncated);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("Png")));
        let r = run("RGB", vec![0xFF, 0x4F, 0xFF, 0x51, 0, 0]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("JPEG 2000")));
        let r = run("RGB", Vec::new());
        assert!(matches!(r, Err(RefError::Kernel { .. })));
        let r = run("CMYK", png_2x1());
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("CMYK")));
    }
}
