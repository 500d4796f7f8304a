//! [`Tensor`]: a dtype, a fully known shape and row-major data. Fixed-size
//! dtypes keep one contiguous little-endian buffer (what `tensor_content` and
//! the compressed encoding carry, so encoding is a copy or nothing); strings
//! keep one byte string per element.

use std::fmt;

use bytes::{Bytes, BytesMut};
use tfdata_proto::tensorflow::DataType;

use crate::{Error, Result};

/// A TensorFlow dtype; the discriminants are TensorFlow's codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DType {
    Float = 1,
    Double = 2,
    Int32 = 3,
    UInt8 = 4,
    Int16 = 5,
    Int8 = 6,
    String = 7,
    Complex64 = 8,
    Int64 = 9,
    Bool = 10,
    QInt8 = 11,
    QUInt8 = 12,
    QInt32 = 13,
    BFloat16 = 14,
    QInt16 = 15,
    QUInt16 = 16,
    UInt16 = 17,
    Complex128 = 18,
    Half = 19,
    UInt32 = 22,
    UInt64 = 23,
    Float8E5M2 = 24,
    Float8E4M3FN = 25,
    Float8E4M3FNUZ = 26,
    Float8E4M3B11FNUZ = 27,
    Float8E5M2FNUZ = 28,
}

impl DType {
    /// The dtype for a TensorFlow dtype code, or an error naming the code for
    /// dtypes a tfdata tensor cannot hold (resources, variants, sub-byte types).
    pub fn from_code(code: i32) -> Result<DType> {
        use DType::*;
        Ok(match code {
            1 => Float,
            2 => Double,
            3 => Int32,
            4 => UInt8,
            5 => Int16,
            6 => Int8,
            7 => String,
            8 => Complex64,
            9 => Int64,
            10 => Bool,
            11 => QInt8,
            12 => QUInt8,
            13 => QInt32,
            14 => BFloat16,
            15 => QInt16,
            16 => QUInt16,
            17 => UInt16,
            18 => Complex128,
            19 => Half,
            22 => UInt32,
            23 => UInt64,
            24 => Float8E5M2,
            25 => Float8E4M3FN,
            26 => Float8E4M3FNUZ,
            27 => Float8E4M3B11FNUZ,
            28 => Float8E5M2FNUZ,
            other => {
                let name = DataType::try_from(other)
                    .map(|d| d.as_str_name().to_string())
                    .unwrap_or_else(|_| format!("dtype code {other}"));
                return Err(Error::Unimplemented(format!(
                    "tensors of {name} are not supported by tfdata"
                )));
            }
        })
    }

    /// The dtype with TensorFlow's lowercase name (`"int64"`, `"float32"`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        (1..=28)
            .filter_map(|code| DType::from_code(code).ok())
            .find(|d| d.name() == name)
    }

    pub fn code(self) -> i32 {
        self as i32
    }

    /// Bytes per element, or `None` for strings.
    pub fn size(self) -> Option<usize> {
        use DType::*;
        Some(match self {
            String => return None,
            UInt8 | Int8 | Bool | QInt8 | QUInt8 | Float8E5M2 | Float8E4M3FN | Float8E4M3FNUZ
            | Float8E4M3B11FNUZ | Float8E5M2FNUZ => 1,
            Int16 | UInt16 | QInt16 | QUInt16 | BFloat16 | Half => 2,
            Float | Int32 | QInt32 | UInt32 => 4,
            Double | Int64 | UInt64 | Complex64 => 8,
            Complex128 => 16,
        })
    }

    /// TensorFlow's lowercase name (`int64`, `float32`, ...).
    pub fn name(self) -> &'static str {
        use DType::*;
        match self {
            Float => "float32",
            Double => "float64",
            Int32 => "int32",
            UInt8 => "uint8",
            Int16 => "int16",
            Int8 => "int8",
            String => "string",
            Complex64 => "complex64",
            Int64 => "int64",
            Bool => "bool",
            QInt8 => "qint8",
            QUInt8 => "quint8",
            QInt32 => "qint32",
            BFloat16 => "bfloat16",
            QInt16 => "qint16",
            QUInt16 => "quint16",
            UInt16 => "uint16",
            Complex128 => "complex128",
            Half => "float16",
            UInt32 => "uint32",
            UInt64 => "uint64",
            Float8E5M2 => "float8_e5m2",
            Float8E4M3FN => "float8_e4m3fn",
            Float8E4M3FNUZ => "float8_e4m3fnuz",
            Float8E4M3B11FNUZ => "float8_e4m3b11fnuz",
            Float8E5M2FNUZ => "float8_e5m2fnuz",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Rust types that are the native representation of a fixed-size dtype.
pub trait NativeType: Copy + fmt::Debug + Send + Sync + 'static {
    const DTYPE: DType;
    const SIZE: usize;
    fn write_le(self, out: &mut Vec<u8>);
    /// Writes the value over the first [`SIZE`](Self::SIZE) bytes of `out`
    /// (nothing if it is shorter).
    fn put_le(self, out: &mut [u8]);
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! native {
    ($t:ty, $d:ident) => {
        impl NativeType for $t {
            const DTYPE: DType = DType::$d;
            const SIZE: usize = std::mem::size_of::<$t>();
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline(always)]
            fn put_le(self, out: &mut [u8]) {
                if let Some(dst) = out.first_chunk_mut::<{ std::mem::size_of::<$t>() }>() {
                    *dst = self.to_le_bytes();
                }
            }
            fn read_le(bytes: &[u8]) -> Self {
                let mut buf = [0u8; std::mem::size_of::<$t>()];
                buf.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_le_bytes(buf)
            }
        }
    };
}
native!(f32, Float);
native!(f64, Double);
native!(i32, Int32);
native!(u8, UInt8);
native!(i16, Int16);
native!(i8, Int8);
native!(i64, Int64);
native!(u16, UInt16);
native!(u32, UInt32);
native!(u64, UInt64);

impl NativeType for bool {
    const DTYPE: DType = DType::Bool;
    const SIZE: usize = 1;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn put_le(self, out: &mut [u8]) {
        if let Some(dst) = out.first_mut() {
            *dst = self as u8;
        }
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

/// A tensor's values: one little-endian buffer, or one byte string per element.
#[derive(Clone, PartialEq, Eq)]
pub enum TensorData {
    Buffer(Bytes),
    Strings(Vec<Bytes>),
}

/// A dense tensor with a fully known shape.
#[derive(Clone, PartialEq, Eq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<i64>,
    data: TensorData,
}

impl Tensor {
    /// A tensor from parts, checking that the data fits dtype and shape.
    pub fn new(dtype: DType, shape: Vec<i64>, data: TensorData) -> Result<Tensor> {
        let n = num_elements(&shape)?;
        match (&data, dtype.size()) {
            (TensorData::Buffer(b), Some(size)) => {
                if b.len() as u128 != n as u128 * size as u128 {
                    return Err(Error::InvalidArgument(format!(
                        "{dtype} tensor of shape {shape:?} needs {} bytes, got {}",
                        n as u128 * size as u128,
                        b.len()
                    )));
                }
            }
            (TensorData::Strings(s), None) => {
                if s.len() as u64 != n {
                    return Err(Error::InvalidArgument(format!(
                        "string tensor of shape {shape:?} needs {n} strings, got {}",
                        s.len()
                    )));
                }
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "{dtype} tensor given the wrong kind of data"
                )));
            }
        }
        Ok(Tensor { dtype, shape, data })
    }

    pub fn scalar<T: NativeType>(value: T) -> Tensor {
        Tensor::from_slice(&[value], vec![]).expect("one value fits a scalar")
    }

    pub fn scalar_string(value: impl Into<Bytes>) -> Tensor {
        Tensor {
            dtype: DType::String,
            shape: vec![],
            data: TensorData::Strings(vec![value.into()]),
        }
    }

    /// A tensor of the given shape from row-major values.
    pub fn from_slice<T: NativeType>(values: &[T], shape: Vec<i64>) -> Result<Tensor> {
        // Written in fixed-size chunks of a zeroed buffer (vectorized), not
        // appended one value at a time.
        let mut buf = vec![0u8; values.len() * T::SIZE];
        for (slot, v) in buf.chunks_exact_mut(T::SIZE).zip(values) {
            v.put_le(slot);
        }
        Tensor::new(T::DTYPE, shape, TensorData::Buffer(buf.into()))
    }

    /// A vector (rank 1) of values.
    pub fn vector<T: NativeType>(values: &[T]) -> Tensor {
        Tensor::from_slice(values, vec![values.len() as i64]).expect("a vector fits its values")
    }

    pub fn strings(values: Vec<Bytes>, shape: Vec<i64>) -> Result<Tensor> {
        Tensor::new(DType::String, shape, TensorData::Strings(values))
    }

    /// The tensor's parts, its buffer handed over rather than shared (a
    /// caller that checks `Bytes::is_unique` sees the truth).
    pub fn into_parts(self) -> (DType, Vec<i64>, TensorData) {
        (self.dtype, self.shape, self.data)
    }

    /// The buffer to write over in place, with the dtype and shape, when the
    /// tensor is fixed-size and nobody else holds its buffer; the tensor
    /// back, unchanged, otherwise. Kernels use it to reuse an input they
    /// own for their output.
    pub fn try_into_unique_buffer(
        self,
    ) -> std::result::Result<(DType, Vec<i64>, BytesMut), Tensor> {
        let Tensor { dtype, shape, data } = self;
        match data {
            TensorData::Buffer(bytes) => match bytes.try_into_mut() {
                Ok(buffer) => Ok((dtype, shape, buffer)),
                Err(bytes) => Err(Tensor {
                    dtype,
                    shape,
                    data: TensorData::Buffer(bytes),
                }),
            },
            data => Err(Tensor { dtype, shape, data }),
        }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub fn data(&self) -> &TensorData {
        &self.data
    }

    pub fn num_elements(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }

    /// Bytes of payload (buffer size, or the sum of string lengths).
    pub fn byte_size(&self) -> usize {
        match &self.data {
            TensorData::Buffer(b) => b.len(),
            TensorData::Strings(s) => s.iter().map(Bytes::len).sum(),
        }
    }

    /// The values as `T`, which must be this tensor's dtype.
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>> {
        match &self.data {
            TensorData::Buffer(b) if self.dtype == T::DTYPE => {
                Ok(b.chunks_exact(T::SIZE).map(T::read_le).collect())
            }
            _ => Err(Error::InvalidArgument(format!(
                "expected a {} tensor, got {}",
                T::DTYPE,
                self.dtype
            ))),
        }
    }

    /// The single value of a scalar (or one-element) tensor.
    pub fn to_scalar<T: NativeType>(&self) -> Result<T> {
        let values = self.to_vec::<T>()?;
        match values.as_slice() {
            [v] => Ok(*v),
            _ => Err(Error::InvalidArgument(format!(
                "expected a scalar, got shape {:?}",
                self.shape
            ))),
        }
    }

    pub fn string_values(&self) -> Result<&[Bytes]> {
        match &self.data {
            TensorData::Strings(s) => Ok(s),
            TensorData::Buffer(_) => Err(Error::InvalidArgument(format!(
                "expected a string tensor, got {}",
                self.dtype
            ))),
        }
    }
}

/// Elements in a shape, rejecting negative (unknown) dimensions.
pub fn num_elements(shape: &[i64]) -> Result<u64> {
    let mut n: u64 = 1;
    for &d in shape {
        if d < 0 {
            return Err(Error::InvalidArgument(format!(
                "tensor shape {shape:?} has an unknown dimension"
            )));
        }
        n = n.checked_mul(d as u64).ok_or_else(|| {
            Error::InvalidArgument(format!("tensor shape {shape:?} is too large"))
        })?;
    }
    Ok(n)
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor<{}{:?}>({})", self.dtype, self.shape, self)
    }
}

/// Values as a flat list (TensorFlow's numpy-like printing is not attempted).
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T: fmt::Debug>(f: &mut fmt::Formatter<'_>, scalar: bool, v: &[T]) -> fmt::Result {
            match (scalar, v) {
                (true, [x]) => write!(f, "{x:?}"),
                _ => write!(f, "{v:?}"),
            }
        }
        let scalar = self.shape.is_empty();
        macro_rules! show {
            ($t:ty) => {
                match self.to_vec::<$t>() {
                    Ok(v) => list(f, scalar, &v),
                    Err(_) => write!(f, "<{} bytes>", self.byte_size()),
                }
            };
        }
        match self.dtype {
            DType::Int64 => show!(i64),
            DType::Int32 => show!(i32),
            DType::Float => show!(f32),
            DType::Double => show!(f64),
            DType::UInt8 => show!(u8),
            DType::Int8 => show!(i8),
            DType::Int16 => show!(i16),
            DType::UInt16 => show!(u16),
            DType::UInt32 => show!(u32),
            DType::UInt64 => show!(u64),
            DType::Bool => show!(bool),
            DType::String => {
                let strings: Vec<String> = self
                    .string_values()
                    .unwrap_or_default()
                    .iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect();
                list(f, scalar, &strings)
            }
            _ => write!(f, "<{} bytes>", self.byte_size()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_shapes_are_checked() {
        let t = Tensor::from_slice(&[1i64, 2, 3, 4, 5, 6], vec![2, 3]).unwrap();
        assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(t.num_elements(), 6);
        assert!(Tensor::from_slice(&[1i64, 2], vec![3]).is_err());
        assert!(t.to_vec::<f32>().is_err());
        assert!(Tensor::from_slice(&[1i64], vec![-1]).is_err());
        assert_eq!(Tensor::scalar(7i64).to_string(), "7");
        assert_eq!(Tensor::vector(&[1.5f32]).to_string(), "[1.5]");
        assert_eq!(Tensor::scalar_string("hi").to_string(), "\"hi\"");
    }

    #[test]
    fn unsupported_dtypes_are_named() {
        let err = DType::from_code(21).unwrap_err().to_string();
        assert!(err.contains("DT_VARIANT"), "{err}");
    }
}
