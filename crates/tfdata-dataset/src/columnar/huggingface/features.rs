//! What Hugging Face features do to a column's Arrow values before they
//! become tensors ([`Fix`]), and the [`BatchTransform`] that applies them
//! to each batch `huggingface_dataset` reads.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, LargeListArray, ListArray, RecordBatch,
    StructArray,
};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use serde_json::Value as Json;
use tfdata_core::{Error, Result};

use super::OP;
use crate::columnar::transform::BatchTransform;

/// Array features have 2 to 5 dimensions.
const MAX_ARRAY_DIMS: usize = 5;
/// Feature nesting at most (lists of dicts of lists...).
const MAX_FEATURE_DEPTH: usize = 32;

/// What a column's Hugging Face feature does to its Arrow values before
/// they become tensors.
#[derive(Debug, Clone, PartialEq)]
pub enum Fix {
    /// Its Arrow type is the tensor's (`Value`, `ClassLabel`, ...).
    Keep,
    /// `Image`, `Audio`, `Video`, `Pdf`: a `struct<bytes, path>`, of which
    /// the bytes are kept.
    Encoded { feature: String },
    /// A list of a feature that needs fixing.
    Items(Box<Fix>),
    /// A dictionary of features (a struct), some needing fixing.
    Fields(BTreeMap<String, Fix>),
    /// `Array2D`...`Array5D`: nested lists of these lengths (a dynamic
    /// first one: `None`), which become fixed-size lists.
    Shape(Vec<Option<usize>>),
}

impl Fix {
    /// The fix `feature` (its JSON form) needs for a column of Arrow type
    /// `t` at `path`.
    pub fn of(feature: &Json, t: &DataType, path: &str) -> Result<Fix> {
        Self::of_depth(feature, t, path, 0)
    }

    fn of_depth(feature: &Json, t: &DataType, path: &str, depth: usize) -> Result<Fix> {
        if depth > MAX_FEATURE_DEPTH {
            return Err(unsupported(path, "nested too deeply"));
        }
        let mismatch = |what: &str| {
            Error::InvalidArgument(format!(
                "column {path}: its feature is {what}, but its Arrow type is {t}"
            ))
        };
        // A list shorthand: [feature].
        if let Some(items) = feature.as_array() {
            let [item] = &items[..] else {
                return Err(unsupported(path, "a list feature of several types"));
            };
            return Self::list(item, t, path, depth, &mismatch);
        }
        let Some(obj) = feature.as_object() else {
            return Err(unsupported(path, &format!("a feature {feature}")));
        };
        let Some(kind) = obj.get("_type").and_then(Json::as_str) else {
            // A dictionary of features.
            return Self::fields(obj, t, path, depth, &mismatch);
        };
        Ok(match kind {
            "Value" | "ClassLabel" | "Translation" | "TranslationVariableLanguages" | "Json" => {
                Fix::Keep
            }
            "Image" | "Audio" | "Video" | "Pdf" => {
                let DataType::Struct(fields) = t else {
                    return Err(mismatch(kind));
                };
                match fields
                    .iter()
                    .find(|f| f.name() == "bytes")
                    .map(|f| f.data_type())
                {
                    Some(DataType::Binary | DataType::LargeBinary | DataType::BinaryView) => {}
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "column {path}: its {kind}s are stored without their bytes ({t}): \
                             tfdata reads no files a dataset points to; save the dataset with \
                             the files embedded (datasets' save_to_disk and push_to_hub embed \
                             local files)"
                        )));
                    }
                }
                Fix::Encoded {
                    feature: kind.to_string(),
                }
            }
            "List" | "LargeList" | "Sequence" => {
                let item = obj
                    .get("feature")
                    .ok_or_else(|| unsupported(path, &format!("a {kind} without its feature")))?;
                Self::list(item, t, path, depth, &mismatch)?
            }
            "Array2D" | "Array3D" | "Array4D" | "Array5D" => {
                let dims: Vec<Option<usize>> = obj
                    .get("shape")
                    .and_then(Json::as_array)
                    .map(|s| {
                        s.iter()
                            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                            .collect()
                    })
                    .unwrap_or_default();
                let fixed_after_first = dims.iter().skip(1).all(Option::is_some);
                if !(2..=MAX_ARRAY_DIMS).contains(&dims.len()) || !fixed_after_first {
                    return Err(unsupported(
                        path,
                        &format!("an {kind} of shape {:?}", obj.get("shape")),
                    ));
                }
                Fix::Shape(dims)
            }
            other => {
                return Err(unsupported(path, &format!("the feature type {other}")));
            }
        })
    }

    /// A list of `item`s (`t` a list type; for `Sequence` of a dictionary,
    /// `datasets` stores a struct of lists instead).
    fn list(
        item: &Json,
        t: &DataType,
        path: &str,
        depth: usize,
        mismatch: &dyn Fn(&str) -> Error,
    ) -> Result<Fix> {
        match t {
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                match Self::of_depth(item, f.data_type(), path, depth + 1)? {
                    Fix::Keep => Ok(Fix::Keep),
                    fix => Ok(Fix::Items(Box::new(fix))),
                }
            }
            DataType::Struct(fields) if item.is_object() && item.get("_type").is_none() => {
                let mut fixes = BTreeMap::new();
                for f in fields {
                    let sub = item.get(f.name()).ok_or_else(|| mismatch("a Sequence"))?;
                    let fix = Self::list(
                        sub,
                        f.data_type(),
                        &format!("{path}.{}", f.name()),
                        depth + 1,
                        mismatch,
                    )?;
                    if fix != Fix::Keep {
                        fixes.insert(f.name().clone(), fix);
                    }
                }
                Ok(if fixes.is_empty() {
                    Fix::Keep
                } else {
                    Fix::Fields(fixes)
                })
            }
            _ => Err(mismatch("a list")),
        }
    }

    fn fields(
        obj: &serde_json::Map<String, Json>,
        t: &DataType,
        path: &str,
        depth: usize,
        mismatch: &dyn Fn(&str) -> Error,
    ) -> Result<Fix> {
        let DataType::Struct(fields) = t else {
            return Err(mismatch("a dictionary of features"));
        };
        let mut fixes = BTreeMap::new();
        for f in fields {
            let Some(sub) = obj.get(f.name()) else {
                continue;
            };
            let fix = Self::of_depth(
                sub,
                f.data_type(),
                &format!("{path}.{}", f.name()),
                depth + 1,
            )?;
            if fix != Fix::Keep {
                fixes.insert(f.name().clone(), fix);
            }
        }
        Ok(if fixes.is_empty() {
            Fix::Keep
        } else {
            Fix::Fields(fixes)
        })
    }

    /// The Arrow type a column of type `t` has once fixed.
    pub fn data_type(&self, t: &DataType, path: &str) -> Result<DataType> {
        let mismatch = || {
            Error::InvalidArgument(format!(
                "column {path}: its Arrow type {t} does not match its feature"
            ))
        };
        Ok(match (self, t) {
            (Fix::Keep, _) => t.clone(),
            (Fix::Encoded { .. }, DataType::Struct(fields)) => fields
                .iter()
                .find(|f| f.name() == "bytes")
                .map(|f| f.data_type().clone())
                .ok_or_else(mismatch)?,
            (Fix::Items(item), DataType::List(f)) => {
                DataType::List(item_field(f, item.data_type(f.data_type(), path)?))
            }
            (Fix::Items(item), DataType::LargeList(f)) => {
                DataType::LargeList(item_field(f, item.data_type(f.data_type(), path)?))
            }
            (Fix::Items(item), DataType::FixedSizeList(f, n)) => {
                DataType::FixedSizeList(item_field(f, item.data_type(f.data_type(), path)?), *n)
            }
            (Fix::Fields(fixes), DataType::Struct(fields)) => {
                DataType::Struct(fixed_fields(fixes, fields, path)?)
            }
            (Fix::Shape(dims), _) => shape_type(dims, t, true).ok_or_else(mismatch)?,
            _ => return Err(mismatch()),
        })
    }

    /// `array` fixed. `what` names where its batch came from, for errors.
    pub fn apply(&self, array: &ArrayRef, path: &str, what: &str) -> Result<ArrayRef> {
        let mismatch = || Error::DataLoss {
            location: what.to_string(),
            reason: format!(
                "column {path}: its Arrow type {} does not match its feature (the schema changed \
                 between files?)",
                array.data_type()
            ),
        };
        let invalid = |e: arrow_schema::ArrowError| Error::DataLoss {
            location: what.to_string(),
            reason: format!("column {path}: {e}"),
        };
        Ok(match self {
            Fix::Keep => Arc::clone(array),
            Fix::Encoded { feature } => {
                let s = array.as_struct_opt().ok_or_else(mismatch)?;
                encoded_bytes(s, feature, path, what)?
            }
            Fix::Items(item) => {
                if let Some(l) = array.as_list_opt::<i32>() {
                    let values = item.apply(l.values(), path, what)?;
                    let field = item_field(field_of(l.data_type()), values.data_type().clone());
                    Arc::new(
                        ListArray::try_new(field, l.offsets().clone(), values, l.nulls().cloned())
                            .map_err(invalid)?,
                    )
                } else if let Some(l) = array.as_list_opt::<i64>() {
                    let values = item.apply(l.values(), path, what)?;
                    let field = item_field(field_of(l.data_type()), values.data_type().clone());
                    Arc::new(
                        LargeListArray::try_new(
                            field,
                            l.offsets().clone(),
                            values,
                            l.nulls().cloned(),
                        )
                        .map_err(invalid)?,
                    )
                } else if let Some(l) = array.as_fixed_size_list_opt() {
                    let values = item.apply(l.values(), path, what)?;
                    let field = item_field(field_of(l.data_type()), values.data_type().clone());
                    Arc::new(
                        FixedSizeListArray::try_new(
                            field,
                            l.value_length(),
                            values,
                            l.nulls().cloned(),
                        )
                        .map_err(invalid)?,
                    )
                } else {
                    return Err(mismatch());
                }
            }
            Fix::Fields(fixes) => {
                let s = array.as_struct_opt().ok_or_else(mismatch)?;
                let mut fields = Vec::with_capacity(s.num_columns());
                let mut columns = Vec::with_capacity(s.num_columns());
                for (f, c) in s.fields().iter().zip(s.columns()) {
                    let sub = format!("{path}.{}", f.name());
                    let fixed = match fixes.get(f.name()) {
                        Some(fix) => fix.apply(c, &sub, what)?,
                        None => Arc::clone(c),
                    };
                    fields.push(Arc::new(
                        f.as_ref()
                            .clone()
                            .with_data_type(fixed.data_type().clone())
                            .with_nullable(true),
                    ));
                    columns.push(fixed);
                }
                Arc::new(
                    StructArray::try_new(Fields::from(fields), columns, s.nulls().cloned())
                        .map_err(invalid)?,
                )
            }
            Fix::Shape(dims) => fixed_shape(array, dims, true, path, what)?,
        })
    }
}

fn unsupported(path: &str, what: &str) -> Error {
    Error::Unimplemented(format!(
        "column {path}: {what} is not read (supported Hugging Face features: Value, ClassLabel, \
         Image, Audio, Video, Pdf, List/Sequence/LargeList, Array2D to Array5D, Translation, \
         Json, and dictionaries of these); leave the column out with columns=[...]"
    ))
}

/// A list's item field with the fixed item type.
fn item_field(f: &FieldRef, t: DataType) -> FieldRef {
    Arc::new(f.as_ref().clone().with_data_type(t).with_nullable(true))
}

/// The item field of a list type (a placeholder for other types, which
/// never get here).
fn field_of(t: &DataType) -> &FieldRef {
    static ITEM: std::sync::OnceLock<FieldRef> = std::sync::OnceLock::new();
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => f,
        _ => ITEM.get_or_init(|| Arc::new(Field::new("item", DataType::Null, true))),
    }
}

fn fixed_fields(fixes: &BTreeMap<String, Fix>, fields: &Fields, path: &str) -> Result<Fields> {
    fields
        .iter()
        .map(|f| {
            let sub = format!("{path}.{}", f.name());
            Ok(match fixes.get(f.name()) {
                Some(fix) => Arc::new(
                    f.as_ref()
                        .clone()
                        .with_data_type(fix.data_type(f.data_type(), &sub)?),
                ),
                None => Arc::clone(f),
            })
        })
        .collect()
}

/// The type of nested lists `t` as fixed-size lists of `dims` (a `None`
/// first: a list).
fn shape_type(dims: &[Option<usize>], t: &DataType, first: bool) -> Option<DataType> {
    let Some((&dim, rest)) = dims.split_first() else {
        return Some(t.clone());
    };
    let (DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)) = t else {
        return None;
    };
    let inner = Arc::new(Field::new(
        f.name(),
        shape_type(rest, f.data_type(), false)?,
        true,
    ));
    match dim {
        Some(n) => Some(DataType::FixedSizeList(inner, i32::try_from(n).ok()?)),
        None if first => Some(DataType::List(inner)),
        None => None,
    }
}

/// Nested lists as fixed-size lists of `dims`; every row must have them.
fn fixed_shape(
    array: &ArrayRef,
    dims: &[Option<usize>],
    first: bool,
    path: &str,
    what: &str,
) -> Result<ArrayRef> {
    let Some((&dim, rest)) = dims.split_first() else {
        return Ok(Arc::clone(array));
    };
    let damaged = |reason: String| Error::DataLoss {
        location: what.to_string(),
        reason: format!("column {path}: {reason}"),
    };
    // Offsets (rebased to the first) and the items they cover.
    let (offsets, items): (Vec<usize>, ArrayRef) = if let Some(l) = array.as_list_opt::<i32>() {
        let o: Vec<usize> = l.offsets().iter().map(|&o| o.max(0) as usize).collect();
        let (start, end) = (
            o.first().copied().unwrap_or(0),
            o.last().copied().unwrap_or(0),
        );
        (
            o.iter().map(|x| x - start).collect(),
            l.values().slice(start, end - start),
        )
    } else if let Some(l) = array.as_list_opt::<i64>() {
        let o: Vec<usize> = l.offsets().iter().map(|&o| o.max(0) as usize).collect();
        let (start, end) = (
            o.first().copied().unwrap_or(0),
            o.last().copied().unwrap_or(0),
        );
        (
            o.iter().map(|x| x - start).collect(),
            l.values().slice(start, end - start),
        )
    } else if let Some(l) = array.as_fixed_size_list_opt() {
        let n = l.value_length().max(0) as usize;
        (
            (0..=l.len()).map(|r| r * n).collect(),
            l.values().slice(l.offset() * n, l.len() * n),
        )
    } else {
        return Err(damaged(format!(
            "an array feature stored as {}, not as lists",
            array.data_type()
        )));
    };
    if array.null_count() > 0 {
        return Err(damaged(
            "an array feature with null rows (declare none: fill them before saving)".into(),
        ));
    }
    let fixed_items = fixed_shape(&items, rest, false, path, what)?;
    let item = Arc::new(Field::new("item", fixed_items.data_type().clone(), true));
    match dim {
        Some(n) => {
            if let Some(r) = offsets.windows(2).position(|w| w[1] - w[0] != n) {
                return Err(damaged(format!(
                    "row {r} has {} items where its shape says {n}",
                    offsets[r + 1] - offsets[r]
                )));
            }
            let n = i32::try_from(n).map_err(|_| damaged(format!("a dimension of {n}")))?;
            FixedSizeListArray::try_new(item, n, fixed_items, None)
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| damaged(e.to_string()))
        }
        None if first => {
            let offsets = offsets
                .iter()
                .map(|&o| i32::try_from(o))
                .collect::<std::result::Result<Vec<i32>, _>>()
                .map_err(|_| damaged("more items than a list holds".into()))?;
            ListArray::try_new(
                item,
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                fixed_items,
                None,
            )
            .map(|a| Arc::new(a) as ArrayRef)
            .map_err(|e| damaged(e.to_string()))
        }
        None => Err(damaged("a dynamic dimension after the first".into())),
    }
}

/// An `Image`/`Audio` column's bytes: null where the struct is null; a row
/// with a path but no bytes is refused.
fn encoded_bytes(s: &StructArray, feature: &str, path: &str, what: &str) -> Result<ArrayRef> {
    let bytes = s.column_by_name("bytes").ok_or_else(|| Error::DataLoss {
        location: what.to_string(),
        reason: format!("column {path}: the {feature} struct has no bytes field"),
    })?;
    let paths = s.column_by_name("path");
    for row in 0..s.len() {
        if s.is_valid(row) && bytes.is_null(row) {
            let file = paths
                .and_then(|p| p.as_string_opt::<i32>())
                .filter(|p| p.is_valid(row))
                .map(|p| p.value(row).to_string());
            return Err(Error::InvalidArgument(format!(
                "{what}: column {path}, row {row}: the {feature} has no bytes in the dataset, \
                 only {}: tfdata reads no files a dataset points to; save the dataset with the \
                 files embedded (save_to_disk and push_to_hub embed local files), or declare a \
                 null value for the column if the row has none",
                file.map_or("no path".to_string(), |f| format!("the path {f}"))
            )));
        }
    }
    match s.nulls() {
        Some(nulls) if nulls.null_count() > 0 => {
            let struct_null =
                BooleanArray::from((0..s.len()).map(|r| s.is_null(r)).collect::<Vec<bool>>());
            arrow_select::nullif::nullif(bytes.as_ref(), &struct_null)
                .map_err(|e| Error::Internal(format!("{what}: column {path}: nulling rows: {e}")))
        }
        _ => Ok(Arc::clone(bytes)),
    }
}

/// The features applied to each batch.
#[derive(Debug)]
pub(super) struct FeatureTransform {
    /// The features `dataset_info.json` lists, if the folder has one.
    info_features: Option<Json>,
    /// The columns read (all when `None`): only their features are checked.
    columns: Option<Vec<String>>,
    /// Each read column's fix, once the first file's schema is known.
    fixes: Mutex<Option<Arc<BTreeMap<String, Fix>>>>,
}

impl FeatureTransform {
    /// The features of `info_features` (`dataset_info.json`'s), else of
    /// the first file's schema metadata, for the columns read (`columns`,
    /// all when `None`).
    pub(super) fn new(info_features: Option<Json>, columns: Option<Vec<String>>) -> Self {
        FeatureTransform {
            info_features,
            columns,
            fixes: Mutex::new(None),
        }
    }

    fn fixes(&self) -> Result<Arc<BTreeMap<String, Fix>>> {
        self.fixes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| Error::Internal(format!("{OP}: a batch before the schema")))
    }
}

/// The features in a schema's `huggingface` metadata.
fn schema_features(schema: &Schema) -> Option<Json> {
    let meta: Json = serde_json::from_str(schema.metadata().get("huggingface")?).ok()?;
    meta.get("info")?.get("features").cloned()
}

impl BatchTransform for FeatureTransform {
    fn schema(&self, file_schema: &Schema) -> Result<SchemaRef> {
        let features = self
            .info_features
            .clone()
            .or_else(|| schema_features(file_schema));
        let mut fixes = BTreeMap::new();
        let mut fields = Vec::with_capacity(file_schema.fields().len());
        for field in file_schema.fields() {
            let name = field.name();
            let read = self.columns.as_ref().is_none_or(|c| c.contains(name));
            let feature = features.as_ref().and_then(|f| f.get(name));
            let (true, Some(feature)) = (read, feature) else {
                fields.push(Arc::clone(field));
                continue;
            };
            let fix = Fix::of(feature, field.data_type(), name)?;
            let t = fix.data_type(field.data_type(), name)?;
            fields.push(Arc::new(field.as_ref().clone().with_data_type(t)));
            if fix != Fix::Keep {
                fixes.insert(name.clone(), fix);
            }
        }
        *self.fixes.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(fixes));
        Ok(Arc::new(Schema::new_with_metadata(
            fields,
            file_schema.metadata().clone(),
        )))
    }

    fn batch(&self, batch: RecordBatch, what: &str) -> Result<RecordBatch> {
        let fixes = self.fixes()?;
        if fixes.is_empty() {
            return Ok(batch);
        }
        let schema = batch.schema();
        let mut fields = Vec::with_capacity(batch.num_columns());
        let mut columns = Vec::with_capacity(batch.num_columns());
        for (field, column) in schema.fields().iter().zip(batch.columns()) {
            let fixed = match fixes.get(field.name()) {
                Some(fix) => fix.apply(column, field.name(), what)?,
                None => Arc::clone(column),
            };
            fields.push(Arc::new(
                field
                    .as_ref()
                    .clone()
                    .with_data_type(fixed.data_type().clone())
                    .with_nullable(true),
            ));
            columns.push(fixed);
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| {
            Error::Internal(format!("{what}: rebuilding a batch with its features: {e}"))
        })
    }
}
