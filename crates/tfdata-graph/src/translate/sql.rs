//! `SqlDataset` and `ExperimentalSqlDataset`
//! (`tf.data.experimental.SqlDataset`): the rows a query gives from an
//! SQLite database (the only driver TensorFlow has), one element per row,
//! each column a scalar of its declared dtype.
//!
//! TensorFlow reads columns with SQLite's `sqlite3_column_*`, so a value
//! stored in another class is converted by SQLite's own rules. Those that
//! are exact are done here (NULL as 0 or "", an integer as text or as a
//! float, an integral real as "N.0"); the others (text as a number, most
//! reals as text) are refused, rather than converted differently.

use std::sync::Arc;

use bytes::Bytes;
use rusqlite::types::ValueRef;
use tfdata_core::{DType, Element, Error, Result, Tensor};
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{Attrs, Dataset, DatasetOp, ElementIterator, IterContext};
use tfdata_proto::tensorflow::NodeDef;

use super::node::handle;
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::kernels::check_size;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    if !matches!(node.op.as_str(), "SqlDataset" | "ExperimentalSqlDataset") {
        return Ok(None);
    }
    let types = attrs.dtypes("output_types")?;
    let spec = spec.clone();
    Ok(Some(handle(
        move |mut i| {
            let driver = i.string("driver_name")?;
            let source = i.string("data_source_name")?;
            let query = i.string("query")?;
            if types.iter().any(|t| {
                !matches!(
                    t,
                    DType::String
                        | DType::Int8
                        | DType::Int16
                        | DType::Int32
                        | DType::Int64
                        | DType::UInt8
                        | DType::UInt16
                        | DType::Bool
                        | DType::Double
                )
            }) {
                return Err(Error::InvalidArgument(
                    "Each element of `output_types_` must be one of: DT_STRING, DT_INT8, \
                     DT_INT16, DT_INT32, DT_INT64, DT_UINT8, DT_UINT16, DT_BOOL, DT_DOUBLE "
                        .into(),
                ));
            }
            if driver != "sqlite" {
                return Err(Error::InvalidArgument(format!(
                    "The database type, {driver}, is not supported by SqlDataset. The set of \
                     supported databases is: {{'sqlite'}}."
                )));
            }
            Ok(Dataset::from_op(Sql {
                query: Arc::new(Query {
                    source,
                    query,
                    types: types.clone(),
                }),
                spec: spec.clone(),
            }))
        },
        node,
    )))
}

#[derive(Debug)]
struct Query {
    source: String,
    query: String,
    types: Vec<DType>,
}

#[derive(Debug)]
struct Sql {
    query: Arc<Query>,
    spec: Option<Structure>,
}

impl DatasetOp for Sql {
    fn name(&self) -> &'static str {
        "sql"
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("data_source_name", self.query.source.clone())
            .with("query", self.query.query.clone())
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(self.spec.clone())
    }
    fn cardinality(&self) -> i64 {
        tfdata_dataset::UNKNOWN_CARDINALITY
    }
    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(SqlIter {
            query: self.query.clone(),
            rows: None,
        }))
    }
}

/// The query runs at the first element, as TensorFlow's does; its rows
/// are read then (bounded), since a statement cannot outlive its
/// connection inside one iterator without self-reference.
struct SqlIter {
    query: Arc<Query>,
    rows: Option<std::vec::IntoIter<Result<Vec<Tensor>>>>,
}

impl ElementIterator for SqlIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.rows.is_none() {
            self.rows = Some(run(&self.query)?.into_iter());
        }
        match self.rows.as_mut().and_then(Iterator::next) {
            None => Ok(None),
            Some(row) => row.map(|r| Some(Element::new(r))),
        }
    }
}

/// SQLite's failure as TensorFlow words it (`[code] message: query`),
/// with its code (Unknown).
fn sql_err(what: &str, e: rusqlite::Error, query: &str) -> Error {
    let text = match &e {
        rusqlite::Error::SqliteFailure(f, Some(msg)) => {
            format!("[{}] {msg}", f.extended_code & 0xff)
        }
        rusqlite::Error::SqlInputError { error, msg, .. } => {
            format!("[{}] {msg}", error.extended_code & 0xff)
        }
        other => other.to_string(),
    };
    Error::Remote {
        code: tonic::Code::Unknown,
        message: format!("{what} failed: {text}: {query}"),
    }
}

fn run(q: &Query) -> Result<Vec<Result<Vec<Tensor>>>> {
    use rusqlite::OpenFlags;
    let conn = rusqlite::Connection::open_with_flags(
        &q.source,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sql_err("Open()", e, &q.source))?;
    let mut stmt = conn
        .prepare(&q.query)
        .map_err(|e| sql_err("Prepare()", e, &q.query))?;
    let columns = stmt.column_count();
    if columns != q.types.len() {
        return Err(Error::InvalidArgument(format!(
            "The number of columns in query ({columns}) must match the number of elements in \
             output_types ({}).",
            q.types.len()
        )));
    }
    let mut rows = stmt.query([]).map_err(|e| sql_err("Step()", e, &q.query))?;
    let mut out = Vec::new();
    let mut values = 0u64;
    while let Some(row) = rows.next().map_err(|e| sql_err("Step()", e, &q.query))? {
        let converted = (0..columns)
            .map(|c| {
                let v = row.get_ref(c).map_err(|e| sql_err("column", e, &q.query))?;
                column(v, q.types[c], c)
            })
            .collect::<Result<Vec<_>>>();
        values += columns as u64;
        check_size("SqlDataset", DType::String, values)?;
        out.push(converted);
    }
    Ok(out)
}

fn refuse(c: usize, dtype: DType, stored: &str) -> Error {
    Error::Unimplemented(format!(
        "SqlDataset: column {c} holds {stored}, read as {dtype}: SQLite's conversion of it is not \
         reproduced"
    ))
}

/// One column as `dtype`, as `sqlite3_column_*` reads it.
fn column(v: ValueRef<'_>, dtype: DType, c: usize) -> Result<Tensor> {
    // An integer as sqlite3_column_int (32 bits) or _int64 read it.
    let int = |v: ValueRef<'_>| -> Result<i64> {
        match v {
            ValueRef::Null => Ok(0),
            ValueRef::Integer(i) => Ok(i),
            ValueRef::Real(_) => Err(refuse(c, dtype, "a real")),
            ValueRef::Text(_) | ValueRef::Blob(_) => Err(refuse(c, dtype, "text")),
        }
    };
    Ok(match dtype {
        DType::String => Tensor::scalar_string(match v {
            ValueRef::Null => Bytes::new(),
            ValueRef::Integer(i) => Bytes::from(i.to_string()),
            ValueRef::Real(r) if r.is_finite() && r.fract() == 0.0 && r.abs() < 1e15 => {
                Bytes::from(format!("{r:.1}"))
            }
            ValueRef::Real(_) => return Err(refuse(c, dtype, "a real")),
            ValueRef::Text(t) | ValueRef::Blob(t) => Bytes::copy_from_slice(t),
        }),
        DType::Int8 => Tensor::scalar(int(v)? as i32 as i8),
        DType::Int16 => Tensor::scalar(int(v)? as i32 as i16),
        DType::Int32 => Tensor::scalar(int(v)? as i32),
        DType::Int64 => Tensor::scalar(int(v)?),
        DType::UInt8 => Tensor::scalar(int(v)? as i32 as u8),
        DType::UInt16 => Tensor::scalar(int(v)? as i32 as u16),
        DType::Bool => Tensor::scalar(int(v)? as i32 != 0),
        DType::Double => Tensor::scalar(match v {
            ValueRef::Null => 0.0,
            ValueRef::Integer(i) => i as f64,
            ValueRef::Real(r) => r,
            ValueRef::Text(_) | ValueRef::Blob(_) => return Err(refuse(c, dtype, "text")),
        }),
        other => {
            return Err(Error::InvalidArgument(format!(
                "SqlDataset: output type {other} is not supported"
            )));
        }
    })
}
