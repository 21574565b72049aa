//! Reading `.npz` archives (numpy's zip of `.npy` arrays, deflate-compressed or stored), e.g.
//! the JAX reference data `tests/fixtures/jax/<name>.ref0.npz` with inputs `in_0..` and
//! outputs `out_0..`. The archive is read with the `zip` crate and each array with `npyz`;
//! [`npz_bytes`] writes one the same way (`ebb run --save-outputs`).
//!
//! Supported element types: `b1`, `i1`, `i2`, `i4`, `i8`, `u1`, `u4`, `f2`, `f4`, `f8` in
//! either byte order and C order; anything else is [`NpzError::UnsupportedType`].

use crate::buffer::Buf;
use crate::error::NpzError;
use crate::tensor::{Data, Tensor};
use npyz::{NpyFile, Order, TypeChar};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

/// An open `.npz` archive, read from a file ([`Npz::open`]) or any seekable reader
/// ([`Npz::from_reader`]).
pub struct Npz<R = BufReader<File>> {
    path: String,
    archive: zip::ZipArchive<R>,
}

impl Npz {
    /// Opens the archive at `path`.
    ///
    /// # Errors
    /// [`NpzError::Io`] when the file cannot be opened, [`NpzError::Zip`] when it is not a zip
    /// archive.
    pub fn open(path: &Path) -> Result<Npz, NpzError> {
        let p = path.display().to_string();
        let f = ebb_ir::fsio::open_regular(path).map_err(|source| NpzError::Io {
            path: p.clone(),
            source,
        })?;
        Npz::from_reader(BufReader::new(f), &p)
    }
}

impl<R: Read + std::io::Seek> Npz<R> {
    /// Opens the archive held by `reader`; `path` names it in errors.
    ///
    /// # Errors
    /// [`NpzError::Zip`] when it is not a zip archive.
    pub fn from_reader(reader: R, path: &str) -> Result<Npz<R>, NpzError> {
        let archive = zip::ZipArchive::new(reader).map_err(|e| NpzError::Zip {
            path: path.into(),
            msg: e.to_string(),
        })?;
        Ok(Npz {
            path: path.into(),
            archive,
        })
    }

    /// Names of the arrays (entry names without `.npy`), in archive order.
    pub fn names(&self) -> Vec<String> {
        self.archive
            .file_names()
            .map(|n| n.strip_suffix(".npy").unwrap_or(n).to_string())
            .collect()
    }

    /// Reads array `name` (and nothing else of the archive).
    ///
    /// # Errors
    /// [`NpzError::Missing`], [`NpzError::Zip`] (decompression), [`NpzError::Npy`] (bad
    /// header or data), [`NpzError::UnsupportedType`], [`NpzError::TooLarge`] for an entry
    /// larger than the process may still allocate ([`crate::host_memory`]), before it is
    /// read.
    pub fn get(&mut self, name: &str) -> Result<Tensor, NpzError> {
        let path = self.path.clone();
        let mut entry = match self.archive.by_name(&format!("{name}.npy")) {
            Ok(e) => e,
            Err(zip::result::ZipError::FileNotFound) => {
                return Err(NpzError::Missing {
                    path,
                    name: name.into(),
                })
            }
            Err(e) => {
                return Err(NpzError::Zip {
                    path,
                    msg: e.to_string(),
                })
            }
        };
        // The declared size is only a hint (a damaged archive may claim any size): the
        // buffer grows with what decompression actually yields, up to what the process may
        // still allocate.
        let limit = crate::host_memory::host_memory_limit();
        let too_large = |limit: &crate::host_memory::HostLimit| NpzError::TooLarge {
            path: path.clone(),
            name: name.into(),
            limit: limit.bytes,
            limited_by: limit.source.clone(),
        };
        if let Some(l) = &limit {
            if entry.size() > l.bytes as u64 {
                return Err(too_large(l));
            }
        }
        let cap = limit.as_ref().map_or(u64::MAX, |l| l.bytes as u64);
        let mut bytes = Vec::with_capacity((entry.size() as usize).min(1 << 26));
        (&mut entry)
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| NpzError::Zip {
                path: path.clone(),
                msg: e.to_string(),
            })?;
        if let Some(l) = limit.filter(|l| bytes.len() as u64 > l.bytes as u64) {
            return Err(too_large(&l));
        }
        parse_npy(&bytes, &path, name)
    }
}

/// Reads every array of the archive at `path`, by name (for tools and tests: a step's inputs
/// are read with [`crate::inputs::npz_inputs`], which reads only the arrays it names).
///
/// # Errors
/// As [`Npz::open`] and [`Npz::get`].
pub fn load_npz(path: &Path) -> Result<BTreeMap<String, Tensor>, NpzError> {
    let mut z = Npz::open(path)?;
    let mut out = BTreeMap::new();
    for n in z.names() {
        let t = z.get(&n)?;
        out.insert(n, t);
    }
    Ok(out)
}

/// Parses one `.npy` file held in memory.
///
/// # Errors
/// [`NpzError::Npy`] or [`NpzError::UnsupportedType`], naming `path` and `name`.
pub fn parse_npy(bytes: &[u8], path: &str, name: &str) -> Result<Tensor, NpzError> {
    let npy_err = |msg: String| NpzError::Npy {
        path: path.into(),
        name: name.into(),
        msg,
    };
    let npy = NpyFile::new(bytes).map_err(|e| npy_err(e.to_string()))?;
    let dtype = npy.dtype();
    let descr = dtype.descr();
    let unsupported = || NpzError::UnsupportedType {
        path: path.into(),
        name: name.into(),
        descr: descr.clone(),
    };
    let ts = match &dtype {
        npyz::DType::Plain(ts) => ts.clone(),
        _ => return Err(unsupported()),
    };
    if npy.order() != Order::C && npy.shape().len() > 1 {
        return Err(unsupported());
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    // The header's shape must fit in the bytes held, before anything is allocated for it
    // (a damaged header may claim any shape).
    let declared = shape
        .iter()
        .try_fold(ts.num_bytes().unwrap_or(1), |n, &d| n.checked_mul(d));
    match declared {
        Some(n) if n <= bytes.len() => {}
        _ => {
            return Err(npy_err(format!(
                "the header declares shape {shape:?} of `{descr}`, more than the {} bytes held",
                bytes.len()
            )))
        }
    }
    fn read<T: npyz::Deserialize>(
        npy: NpyFile<&[u8]>,
        path: &str,
        name: &str,
    ) -> Result<Vec<T>, NpzError> {
        npy.into_vec::<T>().map_err(|e| NpzError::Npy {
            path: path.into(),
            name: name.into(),
            msg: e.to_string(),
        })
    }
    let data = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Bool, 1) => Data::I1(Buf::from(read::<bool>(npy, path, name)?)),
        (TypeChar::Int, 1) => Data::I8(Buf::from(read::<i8>(npy, path, name)?)),
        (TypeChar::Int, 2) => Data::I16(Buf::from(read::<i16>(npy, path, name)?)),
        (TypeChar::Int, 4) => Data::I32(Buf::from(read::<i32>(npy, path, name)?)),
        (TypeChar::Int, 8) => Data::I64(Buf::from(read::<i64>(npy, path, name)?)),
        (TypeChar::Uint, 1) => Data::U8(Buf::from(read::<u8>(npy, path, name)?)),
        (TypeChar::Uint, 4) => Data::U32(Buf::from(read::<u32>(npy, path, name)?)),
        (TypeChar::Uint, 8) => Data::U64(Buf::from(read::<u64>(npy, path, name)?)),
        (TypeChar::Float, 2) => Data::F16(Buf::from(read::<half::f16>(npy, path, name)?)),
        (TypeChar::Float, 4) => Data::F32(Buf::from(read::<f32>(npy, path, name)?)),
        (TypeChar::Float, 8) => Data::F64(Buf::from(read::<f64>(npy, path, name)?)),
        _ => return Err(unsupported()),
    };
    Tensor::new(shape, data).map_err(|err| npy_err(err.to_string()))
}

/// One `.npy` file of `v` with `shape`, C order, the element type's default descriptor.
fn npy<T: npyz::AutoSerialize + Copy>(shape: &[u64], v: &[T]) -> std::io::Result<Vec<u8>> {
    use npyz::WriterBuilder;
    let mut buf = Vec::new();
    let mut w = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut buf)
        .begin_nd()?;
    w.extend(v.iter().copied())?;
    w.finish()?;
    Ok(buf)
}

/// An `.npz` archive (deflate) holding `tensors`, each as `<name>.npy` in C order with its own
/// element type, except `bf16`, which numpy lacks: written as `float32` (exact, every `bf16`
/// is an `f32`). `path` names the archive in errors.
///
/// # Errors
/// [`NpzError::Zip`] when the archive cannot be assembled.
pub fn npz_bytes(tensors: &[(String, &Tensor)], path: &str) -> Result<Vec<u8>, NpzError> {
    let zip_err = |msg: String| NpzError::Zip {
        path: path.into(),
        msg,
    };
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, t) in tensors {
        let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
        let bytes = match t.data() {
            Data::F32(v) => npy(&shape, v),
            Data::BF16(v) => npy(&shape, &v.iter().map(|x| x.to_f32()).collect::<Vec<f32>>()),
            Data::F16(v) => npy(&shape, v),
            Data::F64(v) => npy(&shape, v),
            Data::I1(v) => npy(&shape, v),
            Data::I8(v) => npy(&shape, v),
            Data::I16(v) => npy(&shape, v),
            Data::I32(v) => npy(&shape, v),
            Data::I64(v) => npy(&shape, v),
            Data::U8(v) => npy(&shape, v),
            Data::U32(v) => npy(&shape, v),
            Data::U64(v) => npy(&shape, v),
        }
        .map_err(|e| zip_err(format!("{name}: {e}")))?;
        zip.start_file(format!("{name}.npy"), options)
            .map_err(|e| zip_err(e.to_string()))?;
        std::io::Write::write_all(&mut zip, &bytes).map_err(|e| zip_err(e.to_string()))?;
    }
    Ok(zip
        .finish()
        .map_err(|e| zip_err(e.to_string()))?
        .into_inner())
}
