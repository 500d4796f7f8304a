//! Row filters on columns (`filter=` of the columnar sources): comparisons
//! of a column with a literal, and `and` / `or` / `not` of them, written as
//! pyarrow writes `filters=`:
//!
//! * a predicate: `["label", ">=", 3]` (`==` or `=`, `!=`, `<`, `<=`, `>`,
//!   `>=`, `in`, `not in` with a list);
//! * a list of predicates: all must hold (and);
//! * a list of such lists: any must hold (or of ands, pyarrow's disjunctive
//!   normal form);
//! * or explicitly `{"and": [...]}`, `{"or": [...]}`, `{"not": p}`.
//!
//! A predicate is used twice. Against a row group's statistics (min, max,
//! null count) it says whether any row *may* match, so row groups where
//! none can are never read ([`Predicate::may_match`]); against the rows
//! read it says exactly which match ([`Predicate::mask`]). A null never
//! matches a comparison (SQL's rule, and pyarrow's).

use std::cmp::Ordering;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Schema};
use tfdata_core::{Error, Result};

use crate::attrs::Attr;

/// Deepest nesting of and / or / not accepted.
pub const MAX_DEPTH: usize = 32;
/// Most comparisons in one filter, and values in one `in` list.
pub const MAX_TERMS: usize = 4096;

/// A literal a column is compared with.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Int(i128),
    Float(f64),
    Str(Vec<u8>),
    Bool(bool),
}

impl Literal {
    fn from_attr(a: &Attr) -> Option<Literal> {
        Some(match a {
            Attr::Int(v) => Literal::Int(i128::from(*v)),
            Attr::Float(v) => Literal::Float(*v),
            Attr::Str(s) => Literal::Str(s.as_bytes().to_vec()),
            Attr::Bool(b) => Literal::Bool(*b),
            _ => return None,
        })
    }

    fn to_attr(&self) -> Attr {
        match self {
            Literal::Int(v) => Attr::Int(i64::try_from(*v).unwrap_or(i64::MAX)),
            Literal::Float(v) => Attr::Float(*v),
            Literal::Str(s) => Attr::Str(String::from_utf8_lossy(s).into_owned()),
            Literal::Bool(b) => Attr::Bool(*b),
        }
    }

    /// How `self` (a column's value) compares with `other`; `None` when
    /// the two cannot be compared.
    fn compare(&self, other: &Literal) -> Option<Ordering> {
        use Literal::*;
        match (self, other) {
            (Int(a), Int(b)) => Some(a.cmp(b)),
            (Int(a), Float(b)) => (*a as f64).partial_cmp(b),
            (Float(a), Int(b)) => a.partial_cmp(&(*b as f64)),
            (Float(a), Float(b)) => a.partial_cmp(b),
            (Str(a), Str(b)) => Some(a.cmp(b)),
            (Bool(a), Bool(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Literal::Int(_) | Literal::Float(_) => "a number",
            Literal::Str(_) => "a string",
            Literal::Bool(_) => "a boolean",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
}

impl CmpOp {
    fn parse(s: &str) -> Option<CmpOp> {
        Some(match s {
            "==" | "=" => CmpOp::Eq,
            "!=" => CmpOp::Ne,
            "<" => CmpOp::Lt,
            "<=" => CmpOp::Le,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::Ge,
            "in" => CmpOp::In,
            "not in" => CmpOp::NotIn,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::In => "in",
            CmpOp::NotIn => "not in",
        }
    }

    /// Whether `value op literals` holds.
    fn holds(self, value: &Literal, literals: &[Literal]) -> bool {
        let ord = |l: &Literal| value.compare(l);
        match self {
            CmpOp::Eq => ord(&literals[0]) == Some(Ordering::Equal),
            CmpOp::Ne => ord(&literals[0]).is_some_and(|o| o != Ordering::Equal),
            CmpOp::Lt => ord(&literals[0]) == Some(Ordering::Less),
            CmpOp::Le => ord(&literals[0]).is_some_and(|o| o != Ordering::Greater),
            CmpOp::Gt => ord(&literals[0]) == Some(Ordering::Greater),
            CmpOp::Ge => ord(&literals[0]).is_some_and(|o| o != Ordering::Less),
            CmpOp::In => literals.iter().any(|l| ord(l) == Some(Ordering::Equal)),
            CmpOp::NotIn => literals
                .iter()
                .all(|l| ord(l).is_some_and(|o| o != Ordering::Equal)),
        }
    }
}

/// A row filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    Cmp {
        column: String,
        op: CmpOp,
        /// One literal, or the list of `in` / `not in`.
        values: Vec<Literal>,
    },
    And(Vec<Predicate>),
    Or(Vec<Predicate>),
    Not(Box<Predicate>),
}

/// What a row group's statistics say of one column: its smallest and
/// largest values (when recorded), its nulls and its rows.
#[derive(Debug, Clone, Default)]
pub struct ColumnStats {
    pub min: Option<Literal>,
    pub max: Option<Literal>,
    pub null_count: Option<u64>,
    pub rows: u64,
}

impl Predicate {
    /// Parses `filter` as written in an op's attributes (the module docs).
    pub fn parse(op: &str, filter: &Attr) -> Result<Predicate> {
        let mut terms = 0;
        let p = parse(filter, 0, &mut terms).map_err(|why| {
            Error::InvalidArgument(format!(
                "{op}: filter: {why} (write [\"column\", \">=\", 3], a list of those for and, a \
                 list of such lists for or, or {{\"and\"|\"or\": [...]}}, {{\"not\": ...}})"
            ))
        })?;
        Ok(p)
    }

    /// The attribute form, which [`Predicate::parse`] reads back.
    pub fn to_attr(&self) -> Attr {
        let map = |k: &str, v: Attr| Attr::Map([(k.to_string(), v)].into());
        match self {
            Predicate::Cmp { column, op, values } => {
                let value = match op {
                    CmpOp::In | CmpOp::NotIn => {
                        Attr::List(values.iter().map(Literal::to_attr).collect())
                    }
                    _ => values[0].to_attr(),
                };
                Attr::List(vec![
                    Attr::Str(column.clone()),
                    Attr::Str(op.name().into()),
                    value,
                ])
            }
            Predicate::And(ps) => map("and", Attr::List(ps.iter().map(Self::to_attr).collect())),
            Predicate::Or(ps) => map("or", Attr::List(ps.iter().map(Self::to_attr).collect())),
            Predicate::Not(p) => map("not", p.to_attr()),
        }
    }

    /// The columns it reads.
    pub fn columns(&self, out: &mut Vec<String>) {
        match self {
            Predicate::Cmp { column, .. } => {
                if !out.contains(column) {
                    out.push(column.clone());
                }
            }
            Predicate::And(ps) | Predicate::Or(ps) => ps.iter().for_each(|p| p.columns(out)),
            Predicate::Not(p) => p.columns(out),
        }
    }

    /// Checks that every column exists in `schema` with a type its
    /// literals compare with.
    pub fn check(&self, op: &str, schema: &Schema) -> Result<()> {
        match self {
            Predicate::Cmp { column, values, .. } => {
                let field = schema.field_with_name(column).map_err(|_| {
                    Error::InvalidArgument(format!("{op}: filter: no column {column}"))
                })?;
                let kind = comparable_kind(field.data_type()).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "{op}: filter: column {column} is {}, which filters cannot compare \
                         (numbers, strings and booleans can)",
                        field.data_type()
                    ))
                })?;
                for v in values {
                    if v.kind() != kind {
                        return Err(Error::InvalidArgument(format!(
                            "{op}: filter: column {column} holds {kind}s, it cannot be compared \
                             with {}",
                            v.kind()
                        )));
                    }
                }
                Ok(())
            }
            Predicate::And(ps) | Predicate::Or(ps) => {
                ps.iter().try_for_each(|p| p.check(op, schema))
            }
            Predicate::Not(p) => p.check(op, schema),
        }
    }

    /// Whether any row of a row group whose columns have `stats` may
    /// match: `false` only when none can.
    pub fn may_match(&self, stats: &dyn Fn(&str) -> Option<ColumnStats>) -> bool {
        match self {
            Predicate::Cmp { column, op, values } => {
                let Some(s) = stats(column) else {
                    return true;
                };
                if s.rows > 0 && s.null_count == Some(s.rows) {
                    return false; // only nulls: no comparison holds
                }
                let (Some(min), Some(max)) = (&s.min, &s.max) else {
                    return true;
                };
                let lt = |a: &Literal, b: &Literal| a.compare(b) == Some(Ordering::Less);
                let within = |v: &Literal| !lt(v, min) && !lt(max, v);
                match op {
                    CmpOp::Eq => within(&values[0]),
                    CmpOp::In => values.iter().any(within),
                    // Fails only when every row equals the value.
                    CmpOp::Ne => !(min == max && min.compare(&values[0]) == Some(Ordering::Equal)),
                    CmpOp::NotIn => {
                        !(min == max
                            && values
                                .iter()
                                .any(|v| min.compare(v) == Some(Ordering::Equal)))
                    }
                    CmpOp::Lt => lt(min, &values[0]),
                    CmpOp::Le => !lt(&values[0], min),
                    CmpOp::Gt => lt(&values[0], max),
                    CmpOp::Ge => !lt(max, &values[0]),
                }
            }
            Predicate::And(ps) => ps.iter().all(|p| p.may_match(stats)),
            Predicate::Or(ps) => ps.iter().any(|p| p.may_match(stats)),
            // The statistics cannot say that every row matches the inner
            // predicate, so anything may match its negation.
            Predicate::Not(_) => true,
        }
    }

    /// Which rows of `batch` match.
    pub fn mask(&self, batch: &RecordBatch) -> Result<Vec<bool>> {
        let rows = batch.num_rows();
        Ok(match self {
            Predicate::Cmp { column, op, values } => {
                let array = batch.column_by_name(column).ok_or_else(|| {
                    Error::Internal(format!("filter column {column} was not read"))
                })?;
                let literals = column_literals(array)?;
                literals
                    .iter()
                    .map(|v| v.as_ref().is_some_and(|v| op.holds(v, values)))
                    .collect()
            }
            Predicate::And(ps) => {
                let mut m = vec![true; rows];
                for p in ps {
                    m.iter_mut().zip(p.mask(batch)?).for_each(|(a, b)| *a &= b);
                }
                m
            }
            Predicate::Or(ps) => {
                let mut m = vec![false; rows];
                for p in ps {
                    m.iter_mut().zip(p.mask(batch)?).for_each(|(a, b)| *a |= b);
                }
                m
            }
            Predicate::Not(p) => p.mask(batch)?.into_iter().map(|b| !b).collect(),
        })
    }
}

fn parse(a: &Attr, depth: usize, terms: &mut usize) -> std::result::Result<Predicate, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH}"));
    }
    match a {
        Attr::Map(m) if m.len() == 1 => {
            let (k, v) = m.iter().next().ok_or("an empty map")?;
            match (k.as_str(), v) {
                ("and", Attr::List(ps)) => Ok(Predicate::And(parse_all(ps, depth, terms)?)),
                ("or", Attr::List(ps)) => Ok(Predicate::Or(parse_all(ps, depth, terms)?)),
                ("not", p) => Ok(Predicate::Not(Box::new(parse(p, depth + 1, terms)?))),
                (k, _) => Err(format!("unknown combinator {k:?}")),
            }
        }
        Attr::List(items) => match items.as_slice() {
            [Attr::Str(column), Attr::Str(op), value] => {
                *terms += 1;
                if *terms > MAX_TERMS {
                    return Err(format!("more than {MAX_TERMS} comparisons"));
                }
                let op = CmpOp::parse(op).ok_or_else(|| format!("unknown comparison {op:?}"))?;
                let values = match (op, value) {
                    (CmpOp::In | CmpOp::NotIn, Attr::List(vs)) => {
                        if vs.is_empty() || vs.len() > MAX_TERMS {
                            return Err(format!(
                                "`{}` takes a list of 1 to {MAX_TERMS} values",
                                op.name()
                            ));
                        }
                        vs.iter()
                            .map(|v| Literal::from_attr(v).ok_or("a value that is not a literal"))
                            .collect::<std::result::Result<Vec<_>, _>>()?
                    }
                    (CmpOp::In | CmpOp::NotIn, _) => {
                        return Err(format!("`{}` takes a list of values", op.name()));
                    }
                    (_, v) => vec![Literal::from_attr(v).ok_or_else(|| {
                        format!(
                            "the value compared with {column} must be a number, string or boolean"
                        )
                    })?],
                };
                Ok(Predicate::Cmp {
                    column: column.clone(),
                    op,
                    values,
                })
            }
            [] => Err("an empty list".into()),
            // A list of predicates (and), or of lists of them (or of ands).
            items if items.iter().all(is_predicate_list) => {
                Ok(Predicate::And(parse_all(items, depth, terms)?))
            }
            items
                if items
                    .iter()
                    .all(|i| matches!(i, Attr::List(l) if l.iter().all(is_predicate_list))) =>
            {
                let ors = items
                    .iter()
                    .map(|i| parse(i, depth + 1, terms))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                Ok(Predicate::Or(ors))
            }
            _ => Err("a list that is neither a predicate nor a list of them".into()),
        },
        _ => Err("not a list or an and/or/not map".into()),
    }
}

fn is_predicate_list(a: &Attr) -> bool {
    matches!(a, Attr::List(l) if matches!(l.as_slice(), [Attr::Str(_), Attr::Str(_), _]))
        || matches!(a, Attr::Map(_))
}

fn parse_all(
    items: &[Attr],
    depth: usize,
    terms: &mut usize,
) -> std::result::Result<Vec<Predicate>, String> {
    if items.is_empty() {
        return Err("an empty and / or".into());
    }
    items.iter().map(|i| parse(i, depth + 1, terms)).collect()
}

/// What literals a column of type `t` compares with.
fn comparable_kind(t: &DataType) -> Option<&'static str> {
    use DataType as A;
    match t {
        A::Dictionary(_, v) => comparable_kind(v),
        A::Int8
        | A::Int16
        | A::Int32
        | A::Int64
        | A::UInt8
        | A::UInt16
        | A::UInt32
        | A::UInt64
        | A::Float16
        | A::Float32
        | A::Float64
        | A::Date32
        | A::Date64
        | A::Timestamp(_, _) => Some("a number"),
        A::Utf8 | A::LargeUtf8 | A::Utf8View | A::Binary | A::LargeBinary | A::BinaryView => {
            Some("a string")
        }
        A::Boolean => Some("a boolean"),
        _ => None,
    }
}

/// Per row, the column's value as a literal (`None` for a null).
pub fn column_literals(array: &ArrayRef) -> Result<Vec<Option<Literal>>> {
    use DataType as A;
    use arrow_array::types::*;
    if let Some(dict) = array.as_any_dictionary_opt() {
        let values = column_literals(dict.values())?;
        let keys = arrow_cast_keys(dict.keys())
            .ok_or_else(|| Error::Internal("a dictionary with non-integer keys".into()))?;
        let keys = keys.as_primitive::<Int64Type>();
        return Ok((0..keys.len())
            .map(|i| {
                let k = usize::try_from(keys.value(i)).ok()?;
                (!keys.is_null(i)).then(|| values.get(k).cloned().flatten())?
            })
            .collect());
    }
    macro_rules! ints {
        ($t:ty) => {{
            let a = array.as_primitive::<$t>();
            (0..a.len())
                .map(|i| (!a.is_null(i)).then(|| Literal::Int(a.value(i) as i128)))
                .collect()
        }};
    }
    macro_rules! floats {
        ($t:ty) => {{
            let a = array.as_primitive::<$t>();
            (0..a.len())
                .map(|i| (!a.is_null(i)).then(|| Literal::Float(f64::from(a.value(i)))))
                .collect()
        }};
    }
    macro_rules! strings {
        ($get:expr) => {{
            (0..array.len())
                .map(|i| (!array.is_null(i)).then(|| Literal::Str($get(i))))
                .collect()
        }};
    }
    Ok(match array.data_type() {
        A::Int8 => ints!(Int8Type),
        A::Int16 => ints!(Int16Type),
        A::Int32 => ints!(Int32Type),
        A::Int64 => ints!(Int64Type),
        A::UInt8 => ints!(UInt8Type),
        A::UInt16 => ints!(UInt16Type),
        A::UInt32 => ints!(UInt32Type),
        A::UInt64 => ints!(UInt64Type),
        A::Date32 => ints!(Date32Type),
        A::Date64 => ints!(Date64Type),
        A::Timestamp(unit, _) => {
            use arrow_schema::TimeUnit;
            match unit {
                TimeUnit::Second => ints!(TimestampSecondType),
                TimeUnit::Millisecond => ints!(TimestampMillisecondType),
                TimeUnit::Microsecond => ints!(TimestampMicrosecondType),
                TimeUnit::Nanosecond => ints!(TimestampNanosecondType),
            }
        }
        A::Float16 => {
            let a = array.as_primitive::<Float16Type>();
            (0..a.len())
                .map(|i| (!a.is_null(i)).then(|| Literal::Float(a.value(i).to_f64())))
                .collect()
        }
        A::Float32 => floats!(Float32Type),
        A::Float64 => floats!(Float64Type),
        A::Boolean => {
            let a = array.as_boolean();
            (0..a.len())
                .map(|i| (!a.is_null(i)).then(|| Literal::Bool(a.value(i))))
                .collect()
        }
        A::Utf8 => {
            let a = array.as_string::<i32>();
            strings!(|i| a.value(i).as_bytes().to_vec())
        }
        A::LargeUtf8 => {
            let a = array.as_string::<i64>();
            strings!(|i| a.value(i).as_bytes().to_vec())
        }
        A::Utf8View => {
            let a = array.as_string_view();
            strings!(|i| a.value(i).as_bytes().to_vec())
        }
        A::Binary => {
            let a = array.as_binary::<i32>();
            strings!(|i| a.value(i).to_vec())
        }
        A::LargeBinary => {
            let a = array.as_binary::<i64>();
            strings!(|i| a.value(i).to_vec())
        }
        A::BinaryView => {
            let a = array.as_binary_view();
            strings!(|i| a.value(i).to_vec())
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "filter: a column of type {other} cannot be compared"
            )));
        }
    })
}

/// A dictionary's keys as `Int64` values.
fn arrow_cast_keys(keys: &dyn Array) -> Option<ArrayRef> {
    use arrow_array::types::*;
    macro_rules! widen {
        ($t:ty) => {{
            let k = keys.as_primitive_opt::<$t>()?;
            let v: arrow_array::Int64Array = (0..k.len())
                .map(|i| (!k.is_null(i)).then(|| k.value(i) as i64))
                .collect();
            Some(std::sync::Arc::new(v) as ArrayRef)
        }};
    }
    match keys.data_type() {
        DataType::Int8 => widen!(Int8Type),
        DataType::Int16 => widen!(Int16Type),
        DataType::Int32 => widen!(Int32Type),
        DataType::Int64 => widen!(Int64Type),
        DataType::UInt8 => widen!(UInt8Type),
        DataType::UInt16 => widen!(UInt16Type),
        DataType::UInt32 => widen!(UInt32Type),
        DataType::UInt64 => widen!(UInt64Type),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use std::sync::Arc;

    fn cmp(c: &str, op: &str, v: Attr) -> Attr {
        Attr::List(vec![Attr::Str(c.into()), Attr::Str(op.into()), v])
    }

    #[test]
    fn filters_parse_as_pyarrow_writes_them_and_round_trip() {
        let one = Predicate::parse("t", &cmp("label", ">=", Attr::Int(3))).unwrap();
        assert!(matches!(one, Predicate::Cmp { op: CmpOp::Ge, .. }));
        let and = Attr::List(vec![
            cmp("a", "<", Attr::Int(3)),
            cmp("b", "==", Attr::Str("x".into())),
        ]);
        assert!(matches!(Predicate::parse("t", &and).unwrap(), Predicate::And(v) if v.len() == 2));
        let or = Attr::List(vec![
            and.clone(),
            Attr::List(vec![cmp(
                "c",
                "in",
                Attr::List(vec![Attr::Int(1), Attr::Int(2)]),
            )]),
        ]);
        let p = Predicate::parse("t", &or).unwrap();
        assert!(matches!(&p, Predicate::Or(v) if v.len() == 2));
        assert_eq!(Predicate::parse("t", &p.to_attr()).unwrap(), p);
        for bad in [
            cmp("a", "~", Attr::Int(1)),
            cmp("a", "in", Attr::Int(1)),
            Attr::List(vec![]),
            Attr::Int(3),
            Attr::Map([("xor".to_string(), Attr::List(vec![]))].into()),
        ] {
            let err = Predicate::parse("parquet_dataset", &bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains("parquet_dataset: filter"), "{err}");
        }
    }

    #[test]
    fn rows_match_exactly_and_statistics_prune_only_what_cannot_match() {
        let batch = RecordBatch::try_from_iter(vec![
            (
                "n",
                Arc::new(Int64Array::from(vec![Some(1), None, Some(5), Some(9)])) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from(vec!["a", "b", "c", "d"])) as ArrayRef,
            ),
        ])
        .unwrap();
        let p = Predicate::parse(
            "t",
            &Attr::Map(
                [(
                    "or".to_string(),
                    Attr::List(vec![
                        cmp("n", ">", Attr::Int(4)),
                        cmp("s", "==", Attr::Str("a".into())),
                    ]),
                )]
                .into(),
            ),
        )
        .unwrap();
        p.check("t", &batch.schema()).unwrap();
        assert_eq!(p.mask(&batch).unwrap(), vec![true, false, true, true]);
        let not = Predicate::Not(Box::new(
            Predicate::parse("t", &cmp("n", "<", Attr::Float(5.5))).unwrap(),
        ));
        assert_eq!(not.mask(&batch).unwrap(), vec![false, true, false, true]);
        let stats = |min: i128, max: i128| {
            move |c: &str| {
                (c == "n").then_some(ColumnStats {
                    min: Some(Literal::Int(min)),
                    max: Some(Literal::Int(max)),
                    null_count: Some(0),
                    rows: 10,
                })
            }
        };
        let gt4 = Predicate::parse("t", &cmp("n", ">", Attr::Int(4))).unwrap();
        assert!(!gt4.may_match(&stats(0, 4)));
        assert!(gt4.may_match(&stats(0, 5)));
        let eq = Predicate::parse("t", &cmp("n", "==", Attr::Int(7))).unwrap();
        assert!(!eq.may_match(&stats(8, 20)) && eq.may_match(&stats(7, 7)));
        let ne = Predicate::parse("t", &cmp("n", "!=", Attr::Int(7))).unwrap();
        assert!(!ne.may_match(&stats(7, 7)) && ne.may_match(&stats(6, 7)));
        let err = Predicate::parse("t", &cmp("s", ">", Attr::Int(1)))
            .unwrap()
            .check("t", &batch.schema())
            .unwrap_err();
        assert!(err.to_string().contains("cannot be compared"), "{err}");
    }
}
