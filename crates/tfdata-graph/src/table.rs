//! A `HashTableV2` resource: TensorFlow's initializable hash table (the
//! data; its ops are `kernels::lookup`, its handle a `Value::Table`).
//!
//! The table is created empty when the graph runs its `HashTableV2` node,
//! filled once by `LookupTableImportV2`, `InitializeTableV2` or
//! `InitializeTableFromTextFileV2`, and read-only after that: map functions
//! capture it (an `Arc`) and look keys up concurrently without a lock.
//!
//! TensorFlow's quirks are kept, because they decide which pipelines fail:
//! a second initialisation succeeds when it brings as many entries as the
//! table holds (it compares sizes, not contents) and fails otherwise; a
//! failed initialisation leaves the entries it inserted before the failure
//! staged, and a later successful one starts from them.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

use bytes::Bytes;
use dense_buckets::DenseBuckets;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

/// A key: int32 and int64 keys as `i64`, strings as their bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    Int(i64),
    Str(Bytes),
}

/// The zero of a value dtype (`V()` in TensorFlow's unused buckets).
fn zero_of(dtype: DType) -> Scalar {
    match dtype {
        DType::Int32 => Scalar::I32(0),
        DType::Int64 => Scalar::I64(0),
        DType::Float => Scalar::F32(0.0),
        DType::Double => Scalar::F64(0.0),
        DType::Bool => Scalar::Bool(false),
        _ => Scalar::Str(Bytes::new()),
    }
}

/// A fixed order of keys (integers by value, strings by bytes).
fn key_order(a: &Key, b: &Key) -> std::cmp::Ordering {
    match (a, b) {
        (Key::Int(x), Key::Int(y)) => x.cmp(y),
        (Key::Str(x), Key::Str(y)) => x.cmp(y),
        (Key::Int(_), Key::Str(_)) => std::cmp::Ordering::Less,
        (Key::Str(_), Key::Int(_)) => std::cmp::Ordering::Greater,
    }
}

/// One value of the table's value dtype.
#[derive(Clone, Debug)]
pub enum Scalar {
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(Bytes),
}

impl Scalar {
    /// TensorFlow's `!=` on the stored type: NaN differs from itself.
    fn same(&self, other: &Scalar) -> bool {
        match (self, other) {
            (Scalar::I32(a), Scalar::I32(b)) => a == b,
            (Scalar::I64(a), Scalar::I64(b)) => a == b,
            (Scalar::F32(a), Scalar::F32(b)) => a == b,
            (Scalar::F64(a), Scalar::F64(b)) => a == b,
            (Scalar::Bool(a), Scalar::Bool(b)) => a == b,
            (Scalar::Str(a), Scalar::Str(b)) => a == b,
            _ => false,
        }
    }
}

/// As TensorFlow's `StrCat` prints a key or value in its errors.
impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::I32(v) => write!(f, "{v}"),
            Scalar::I64(v) => write!(f, "{v}"),
            Scalar::F32(v) => f.write_str(&g_format(f64::from(*v), 6, |s| {
                s.parse::<f32>().ok() == Some(*v)
            })),
            Scalar::F64(v) => f.write_str(&g_format(*v, 15, |s| s.parse::<f64>().ok() == Some(*v))),
            Scalar::Bool(v) => write!(f, "{}", u8::from(*v)),
            Scalar::Str(s) => f.write_str(&String::from_utf8_lossy(s)),
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Int(v) => write!(f, "{v}"),
            Key::Str(s) => f.write_str(&String::from_utf8_lossy(s)),
        }
    }
}

/// C's `%.{p}g` with the fewest digits from `p` up that read back to the
/// same value (TensorFlow's `FloatToBuffer`/`DoubleToBuffer` try `p`
/// then the full 9 or 17).
fn g_format(v: f64, p: usize, round_trips: impl Fn(&str) -> bool) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    let first = c_g(v, p);
    if round_trips(&first) {
        return first;
    }
    c_g(v, if p == 6 { 9 } else { 17 })
}

/// C's `%.{p}g`.
fn c_g(v: f64, p: usize) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{:.*e}", p.saturating_sub(1), v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= p as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim(&format!("{v:.decimals$}"))
    }
}

/// The keys of `t` (int32, int64 or string), in row-major order.
pub fn keys_of(t: &Tensor) -> Result<Vec<Key>> {
    Ok(match t.dtype() {
        DType::Int32 => t
            .to_vec::<i32>()?
            .into_iter()
            .map(|v| Key::Int(v.into()))
            .collect(),
        DType::Int64 => t.to_vec::<i64>()?.into_iter().map(Key::Int).collect(),
        DType::String => t.string_values()?.iter().cloned().map(Key::Str).collect(),
        other => {
            return Err(Error::InvalidArgument(format!(
                "lookup table keys of dtype {other} are not supported"
            )));
        }
    })
}

/// The values of `t`, in row-major order.
pub fn scalars_of(t: &Tensor) -> Result<Vec<Scalar>> {
    Ok(match t.dtype() {
        DType::Int32 => t.to_vec::<i32>()?.into_iter().map(Scalar::I32).collect(),
        DType::Int64 => t.to_vec::<i64>()?.into_iter().map(Scalar::I64).collect(),
        DType::Float => t.to_vec::<f32>()?.into_iter().map(Scalar::F32).collect(),
        DType::Double => t.to_vec::<f64>()?.into_iter().map(Scalar::F64).collect(),
        DType::Bool => t.to_vec::<bool>()?.into_iter().map(Scalar::Bool).collect(),
        DType::String => t
            .string_values()?
            .iter()
            .cloned()
            .map(Scalar::Str)
            .collect(),
        other => {
            return Err(Error::InvalidArgument(format!(
                "lookup table values of dtype {other} are not supported"
            )));
        }
    })
}

/// A tensor of `dtype` and `shape` holding `values` (all of that dtype).
pub fn tensor_of(dtype: DType, shape: Vec<i64>, values: Vec<Scalar>) -> Result<Tensor> {
    fn collect<T>(values: Vec<Scalar>, f: impl Fn(Scalar) -> Option<T>) -> Result<Vec<T>> {
        values
            .into_iter()
            .map(|v| f(v).ok_or_else(|| Error::Internal("lookup table: mixed value types".into())))
            .collect()
    }
    match dtype {
        DType::Int32 => Tensor::from_slice(
            &collect(values, |v| {
                if let Scalar::I32(x) = v {
                    Some(x)
                } else {
                    None
                }
            })?,
            shape,
        ),
        DType::Int64 => Tensor::from_slice(
            &collect(values, |v| {
                if let Scalar::I64(x) = v {
                    Some(x)
                } else {
                    None
                }
            })?,
            shape,
        ),
        DType::Float => Tensor::from_slice(
            &collect(values, |v| {
                if let Scalar::F32(x) = v {
                    Some(x)
                } else {
                    None
                }
            })?,
            shape,
        ),
        DType::Double => Tensor::from_slice(
            &collect(values, |v| {
                if let Scalar::F64(x) = v {
                    Some(x)
                } else {
                    None
                }
            })?,
            shape,
        ),
        DType::Bool => Tensor::from_slice(
            &collect(values, |v| {
                if let Scalar::Bool(x) = v {
                    Some(x)
                } else {
                    None
                }
            })?,
            shape,
        ),
        DType::String => Tensor::new(
            DType::String,
            shape,
            TensorData::Strings(collect(values, |v| {
                if let Scalar::Str(x) = v {
                    Some(x)
                } else {
                    None
                }
            })?),
        ),
        other => Err(Error::InvalidArgument(format!(
            "lookup table values of dtype {other} are not supported"
        ))),
    }
}

/// The (key, value) dtype pairs TensorFlow 2.21 registers `HashTableV2`'s
/// CPU kernel for.
pub const DTYPE_PAIRS: &[(DType, DType)] = &[
    (DType::String, DType::String),
    (DType::String, DType::Int64),
    (DType::String, DType::Int32),
    (DType::String, DType::Float),
    (DType::String, DType::Double),
    (DType::String, DType::Bool),
    (DType::Int64, DType::String),
    (DType::Int64, DType::Int64),
    (DType::Int64, DType::Int32),
    (DType::Int64, DType::Float),
    (DType::Int64, DType::Double),
    (DType::Int32, DType::String),
    (DType::Int32, DType::Int32),
    (DType::Int32, DType::Float),
    (DType::Int32, DType::Double),
];

/// Entries a mutable table may hold (the bound on an initialised table's
/// text-file entries, `kernels::lookup::MAX_TABLE_ENTRIES`, likewise).
pub const MAX_MUTABLE_ENTRIES: usize = 1 << 24;

/// A table of tensors' entries: each key's value, flattened.
type RowMap = HashMap<Key, Vec<Scalar>>;

/// An initializable hash table (see the module docs).
#[derive(Debug)]
pub struct LookupTable {
    key_dtype: DType,
    value_dtype: DType,
    /// Entries inserted by initialisations that have not (yet) succeeded.
    staged: Mutex<HashMap<Key, Scalar>>,
    /// The entries, once initialised: read without a lock.
    ready: OnceLock<HashMap<Key, Scalar>>,
    /// A mutable table's entries (`MutableHashTableV2`): inserted and
    /// removed under the lock; `staged` and `ready` stay unused.
    mutable: Option<Mutex<HashMap<Key, Scalar>>>,
    /// A table of tensors (`MutableHashTableOfTensorsV2`): its value shape
    /// (a vector's) and each key's value, flattened.
    rows: Option<(Vec<i64>, Mutex<RowMap>)>,
    /// A dense table's (`MutableDenseHashTableV2`) empty and deleted keys,
    /// which may not be used as keys.
    reserved: Option<(Key, Key)>,
    /// A dense table's entries, in TensorFlow's bucket layout (`rows`
    /// stays unused but for the value shape).
    dense: Option<Mutex<DenseBuckets>>,
}

/// A table's entries as `LookupTableExportV2` gives them.
pub struct Export {
    pub keys: Vec<Key>,
    pub values: Vec<Scalar>,
    /// A dense table's bucket array: keys and values are matrices, a row
    /// per bucket.
    pub buckets: bool,
}

impl LookupTable {
    pub fn new(key_dtype: DType, value_dtype: DType) -> Self {
        LookupTable {
            key_dtype,
            value_dtype,
            staged: Mutex::new(HashMap::new()),
            ready: OnceLock::new(),
            mutable: None,
            rows: None,
            reserved: None,
            dense: None,
        }
    }

    /// An empty dense table (`tf.lookup.experimental.DenseHashTable`) of
    /// `num_buckets` buckets (a power of two, checked by the caller),
    /// whose `empty` and `deleted` keys are refused.
    pub fn new_dense(
        (key_dtype, value_dtype, value_shape): (DType, DType, Vec<i64>),
        empty: Key,
        deleted: Key,
        num_buckets: u64,
        max_load_factor: f32,
    ) -> Result<Self> {
        let buckets =
            DenseBuckets::new(num_buckets, max_load_factor, empty.clone(), deleted.clone())?;
        Ok(LookupTable {
            reserved: Some((empty, deleted)),
            dense: Some(Mutex::new(buckets)),
            ..LookupTable::new_of_tensors(key_dtype, value_dtype, value_shape)
        })
    }

    fn buckets(&self) -> Option<Result<MutexGuard<'_, DenseBuckets>>> {
        self.dense.as_ref().map(|m| {
            m.lock()
                .map_err(|_| Error::Internal("dense table lock poisoned".into()))
        })
    }

    pub fn is_dense(&self) -> bool {
        self.reserved.is_some()
    }

    /// TensorFlow's refusal of a dense table's empty or deleted key.
    fn check_reserved(&self, key: &Key) -> Result<()> {
        match &self.reserved {
            Some((empty, _)) if empty == key => Err(Error::InvalidArgument(
                "Using the empty_key as a table key is not allowed".into(),
            )),
            Some((_, deleted)) if deleted == key => Err(Error::InvalidArgument(
                "Using the deleted_key as a table key is not allowed".into(),
            )),
            _ => Ok(()),
        }
    }

    /// An empty mutable table whose values are tensors of `value_shape`.
    pub fn new_of_tensors(key_dtype: DType, value_dtype: DType, value_shape: Vec<i64>) -> Self {
        LookupTable {
            rows: Some((value_shape, Mutex::new(HashMap::new()))),
            ..LookupTable::new(key_dtype, value_dtype)
        }
    }

    /// A table of tensors' value shape.
    pub fn value_shape(&self) -> Option<&[i64]> {
        self.rows.as_ref().map(|(s, _)| s.as_slice())
    }

    fn rows_map(&self) -> Result<MutexGuard<'_, RowMap>> {
        let (_, m) = self.rows.as_ref().ok_or_else(|| {
            Error::InvalidArgument("this lookup table is not a table of tensors".into())
        })?;
        m.lock()
            .map_err(|_| Error::Internal("mutable table lock poisoned".into()))
    }

    /// Sets `keys[i]` to row `i` of `values` (each `values.len() /
    /// keys.len()` long; a later repeat wins), bounded by
    /// [`MAX_MUTABLE_ENTRIES`].
    pub fn insert_rows(&self, keys: Vec<Key>, values: Vec<Scalar>) -> Result<()> {
        let width = values.len().checked_div(keys.len()).unwrap_or(0);
        let mut values = values.into_iter();
        if let Some(buckets) = self.buckets() {
            let mut buckets = buckets?;
            buckets.reserve(keys.len() as u64)?;
            for k in keys {
                self.check_reserved(&k)?;
                buckets.insert(k, values.by_ref().take(width).collect())?;
            }
            return Ok(());
        }
        let mut map = self.rows_map()?;
        for k in keys {
            // Keys before a refused one stay inserted, as in TensorFlow.
            self.check_reserved(&k)?;
            if map.len() >= MAX_MUTABLE_ENTRIES && !map.contains_key(&k) {
                return Err(Error::InvalidArgument(format!(
                    "mutable table: more than {} entries",
                    MAX_MUTABLE_ENTRIES
                )));
            }
            map.insert(k, values.by_ref().take(width).collect());
        }
        Ok(())
    }

    /// The rows of `keys`, flattened; `default(i)` for the i-th key when
    /// missing.
    pub fn find_rows(
        &self,
        keys: &[Key],
        default: impl Fn(usize) -> Vec<Scalar>,
    ) -> Result<Vec<Scalar>> {
        if let Some(buckets) = self.buckets() {
            let buckets = buckets?;
            let mut out = Vec::new();
            for (i, k) in keys.iter().enumerate() {
                self.check_reserved(k)?;
                match buckets.find(k)? {
                    Some(row) => out.extend_from_slice(row),
                    None => out.extend(default(i)),
                }
            }
            return Ok(out);
        }
        let map = self.rows_map()?;
        let mut out = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            self.check_reserved(k)?;
            match map.get(k) {
                Some(row) => out.extend_from_slice(row),
                None => out.extend(default(i)),
            }
        }
        Ok(out)
    }

    /// An empty mutable table: always initialised, filled by [`Self::insert`].
    pub fn new_mutable(key_dtype: DType, value_dtype: DType) -> Self {
        LookupTable {
            mutable: Some(Mutex::new(HashMap::new())),
            ..LookupTable::new(key_dtype, value_dtype)
        }
    }

    pub fn is_mutable(&self) -> bool {
        self.mutable.is_some()
    }

    fn mutable_map(&self) -> Result<MutexGuard<'_, HashMap<Key, Scalar>>> {
        let m = self.mutable.as_ref().ok_or_else(|| {
            Error::InvalidArgument("this lookup table is not a mutable table".into())
        })?;
        m.lock()
            .map_err(|_| Error::Internal("mutable table lock poisoned".into()))
    }

    /// Sets `keys[i]` to `values[i]` (a later repeat wins), bounded by
    /// [`MAX_MUTABLE_ENTRIES`].
    pub fn insert(&self, keys: Vec<Key>, values: Vec<Scalar>) -> Result<()> {
        let mut map = self.mutable_map()?;
        for (k, v) in keys.into_iter().zip(values) {
            if map.len() >= MAX_MUTABLE_ENTRIES && !map.contains_key(&k) {
                return Err(Error::InvalidArgument(format!(
                    "mutable table: more than {} entries",
                    MAX_MUTABLE_ENTRIES
                )));
            }
            map.insert(k, v);
        }
        Ok(())
    }

    /// Removes `keys` (missing ones are ignored).
    pub fn remove(&self, keys: &[Key]) -> Result<()> {
        if let Some(buckets) = self.buckets() {
            let mut buckets = buckets?;
            for k in keys {
                self.check_reserved(k)?;
                buckets.remove(k)?;
            }
            return Ok(());
        }
        if self.rows.is_some() {
            let mut map = self.rows_map()?;
            for k in keys {
                self.check_reserved(k)?;
                map.remove(k);
            }
            return Ok(());
        }
        let mut map = self.mutable_map()?;
        for k in keys {
            map.remove(k);
        }
        Ok(())
    }

    pub fn key_dtype(&self) -> DType {
        self.key_dtype
    }

    pub fn value_dtype(&self) -> DType {
        self.value_dtype
    }

    /// Entries, 0 before initialisation (`LookupTableSizeV2`).
    pub fn size(&self) -> usize {
        if let Some(buckets) = self.buckets() {
            return buckets.map_or(0, |b| b.len());
        }
        if self.rows.is_some() {
            return self.rows_map().map_or(0, |m| m.len());
        }
        if self.mutable.is_some() {
            return self.mutable_map().map_or(0, |m| m.len());
        }
        self.ready.get().map_or(0, HashMap::len)
    }

    pub fn is_initialized(&self) -> bool {
        self.mutable.is_some() || self.rows.is_some() || self.ready.get().is_some()
    }

    /// The values of `keys`, `default(i)` for the i-th key when missing.
    pub fn find(&self, keys: &[Key], default: impl Fn(usize) -> Scalar) -> Result<Vec<Scalar>> {
        if self.mutable.is_some() {
            let map = self.mutable_map()?;
            return Ok(keys
                .iter()
                .enumerate()
                .map(|(i, k)| map.get(k).cloned().unwrap_or_else(|| default(i)))
                .collect());
        }
        let map = self
            .ready
            .get()
            .ok_or_else(|| Error::FailedPrecondition("Table not initialized.".into()))?;
        Ok(keys
            .iter()
            .enumerate()
            .map(|(i, k)| map.get(k).cloned().unwrap_or_else(|| default(i)))
            .collect())
    }

    /// Every entry, for `LookupTableExportV2`: keys, and values (a row of
    /// the value shape each for a table of tensors), in key order
    /// (TensorFlow gives its hash map's order, seeded per process, so
    /// tfdata picks a fixed one); a dense table's whole bucket array in
    /// TensorFlow's layout, bounded by `check` on its row count.
    pub fn export(&self, check: impl Fn(u64) -> Result<()>) -> Result<Export> {
        fn sorted<V: Clone>(map: &HashMap<Key, V>) -> Vec<(Key, V)> {
            let mut entries: Vec<(Key, V)> =
                map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            entries.sort_by(|a, b| key_order(&a.0, &b.0));
            entries
        }
        let listed = |(keys, values): (Vec<Key>, Vec<Scalar>)| Export {
            keys,
            values,
            buckets: false,
        };
        if let Some(buckets) = self.buckets() {
            let buckets = buckets?;
            let width = self.value_shape().unwrap_or(&[]).iter().product::<i64>();
            check(buckets.num_buckets().saturating_mul(width.max(1) as u64))?;
            let zero = vec![zero_of(self.value_dtype); width as usize];
            let (keys, values) = buckets.export(&zero);
            return Ok(Export {
                keys,
                values,
                buckets: true,
            });
        }
        if self.rows.is_some() {
            let (keys, rows): (Vec<Key>, Vec<Vec<Scalar>>) =
                sorted(&*self.rows_map()?).into_iter().unzip();
            return Ok(listed((keys, rows.into_iter().flatten().collect())));
        }
        if self.mutable.is_some() {
            return Ok(listed(sorted(&*self.mutable_map()?).into_iter().unzip()));
        }
        let empty = HashMap::new();
        Ok(listed(
            sorted(self.ready.get().unwrap_or(&empty))
                .into_iter()
                .unzip(),
        ))
    }

    /// Starts an initialisation: inserts go to the staged entries until
    /// [`Init::finish`] makes them the table's.
    pub fn init(&self) -> Init<'_> {
        let staged = self.staged.lock().unwrap_or_else(|p| p.into_inner());
        Init {
            table: self,
            staged,
        }
    }
}

/// An initialisation under way (holds the table's initialisation lock).
pub struct Init<'a> {
    table: &'a LookupTable,
    staged: MutexGuard<'a, HashMap<Key, Scalar>>,
}

impl Init<'_> {
    /// Entries in the table, if it is initialised already.
    pub fn initialized_size(&self) -> Option<usize> {
        self.table.ready.get().map(HashMap::len)
    }

    /// TensorFlow's answer to initialising an initialised table with
    /// `total` entries: fine if the sizes agree.
    pub fn again(&self, total: u64) -> Result<()> {
        match self.initialized_size() {
            Some(n) if n as u64 == total => Ok(()),
            _ => Err(Error::FailedPrecondition(
                "Table was already initialized with different data.".into(),
            )),
        }
    }

    /// Inserts one entry; the same key with another value is TensorFlow's
    /// error (the entries before it stay staged).
    pub fn insert(&mut self, key: Key, value: Scalar) -> Result<()> {
        use std::collections::hash_map::Entry;
        match self.staged.entry(key) {
            Entry::Vacant(v) => {
                v.insert(value);
                Ok(())
            }
            Entry::Occupied(o) if o.get().same(&value) => Ok(()),
            Entry::Occupied(o) => Err(Error::FailedPrecondition(format!(
                "HashTable has different value for same key. Key {} has {} and trying to add value {value}",
                o.key(),
                o.get()
            ))),
        }
    }

    /// Makes the staged entries the table's: it is initialised.
    pub fn finish(mut self) {
        let entries = std::mem::take(&mut *self.staged);
        // Only one initialisation holds the lock, and it checked the
        // table was not initialised.
        let _ = self.table.ready.set(entries);
    }
}

mod dense_buckets;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_tensorflow_prints_them() {
        let f = |v: f32| Scalar::F32(v).to_string();
        assert_eq!(f(0.5), "0.5");
        assert_eq!(f(1e20), "1e+20");
        assert_eq!(f(0.1), "0.1");
        assert_eq!(f(1.0 / 3.0), "0.333333343");
        assert_eq!(f(123456.0), "123456");
        assert_eq!(f(1234567.0), "1234567");
        assert_eq!(f(1e-5), "1e-05");
        assert_eq!(Scalar::F64(0.25).to_string(), "0.25");
        assert_eq!(Scalar::F64(0.1).to_string(), "0.1");
    }

    #[test]
    fn a_failed_initialisation_keeps_what_it_staged() {
        let t = LookupTable::new(DType::String, DType::Int64);
        let mut init = t.init();
        init.insert(Key::Str("a".into()), Scalar::I64(1)).unwrap();
        let e = init
            .insert(Key::Str("a".into()), Scalar::I64(2))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("Key a has 1 and trying to add value 2")
        );
        drop(init);
        assert!(!t.is_initialized());
        let mut init = t.init();
        init.insert(Key::Str("b".into()), Scalar::I64(2)).unwrap();
        init.finish();
        assert_eq!(t.size(), 2);
        assert!(t.init().again(2).is_ok());
        assert!(t.init().again(3).is_err());
    }
}
