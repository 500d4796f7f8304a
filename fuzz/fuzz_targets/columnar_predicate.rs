//! The columnar sources' row filters (`tfdata_dataset::columnar::predicate`,
//! `filter=` of `parquet_dataset`): any attribute tree the JSON form or the
//! Python API can hand in is parsed without panicking, and a filter that
//! parses keeps pruning honest: a row the exact evaluation keeps is never
//! in a row group or page that the statistics say cannot match (pruning
//! never loses a row), and the filter survives its attribute round trip.
#![no_main]

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use libfuzzer_sys::fuzz_target;
use tfdata_dataset::Attr;
use tfdata_dataset::columnar::predicate::{ColumnStats, Literal, Predicate, column_literals};

/// Reads bytes off the front of the input.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    fn int(&mut self) -> i64 {
        i64::from(self.byte() as i8) * i64::from(self.byte())
    }

    /// An attribute tree, as the JSON form can spell one (bounded depth).
    fn attr(&mut self, depth: usize) -> Attr {
        const COLUMNS: [&str; 5] = ["id", "score", "name", "flag", "nope"];
        const OPS: [&str; 11] = [
            "==", "=", "!=", "<", "<=", ">", ">=", "in", "not in", "and", "~",
        ];
        match self.byte() % if depth > 4 { 5 } else { 8 } {
            0 => Attr::Int(self.int()),
            1 => Attr::Float(f64::from(self.int() as i32) / 4.0),
            2 => Attr::Str(COLUMNS[usize::from(self.byte()) % COLUMNS.len()].into()),
            3 => Attr::Str(OPS[usize::from(self.byte()) % OPS.len()].into()),
            4 => Attr::Bool(self.byte() % 2 == 0),
            5 => {
                // A predicate-shaped list: column, op, value.
                let column = Attr::Str(COLUMNS[usize::from(self.byte()) % COLUMNS.len()].into());
                let op = Attr::Str(OPS[usize::from(self.byte()) % OPS.len()].into());
                Attr::List(vec![column, op, self.attr(depth + 1)])
            }
            6 => {
                let n = usize::from(self.byte() % 4);
                Attr::List((0..n).map(|_| self.attr(depth + 1)).collect())
            }
            _ => {
                let key = ["and", "or", "not", "xor"][usize::from(self.byte()) % 4];
                Attr::Map([(key.to_string(), self.attr(depth + 1))].into())
            }
        }
    }
}

/// Eight rows of a table the filters run on, some values null.
fn table(input: &mut Input<'_>) -> RecordBatch {
    let rows = 8;
    let mut ids = Vec::new();
    let mut scores = Vec::new();
    let mut names = Vec::new();
    let mut flags = Vec::new();
    for _ in 0..rows {
        let b = input.byte();
        ids.push((b % 5 != 0).then(|| input.int()));
        scores.push((b % 7 != 0).then(|| f64::from(input.int() as i32) / 4.0));
        names.push((b % 3 != 0).then(|| ["a", "b", "id", "zz", ""][usize::from(input.byte()) % 5]));
        flags.push((b % 11 != 0).then(|| input.byte() % 2 == 0));
    }
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("score", Arc::new(Float64Array::from(scores))),
        ("name", Arc::new(StringArray::from(names))),
        ("flag", Arc::new(BooleanArray::from(flags))),
    ])
    .expect("a table of four equal columns")
}

/// Statistics of rows `from..to` of `column`, as a writer records them.
fn stats(batch: &RecordBatch, column: &str, from: usize, to: usize) -> Option<ColumnStats> {
    let array = batch.column_by_name(column)?.slice(from, to - from);
    let values = column_literals(&array).ok()?;
    let present: Vec<_> = values.iter().flatten().collect();
    let mut min = present.first().map(|v| (*v).clone());
    let mut max = min.clone();
    for v in present {
        if min.as_ref().is_some_and(|m| lt(v, m)) {
            min = Some(v.clone());
        }
        if max.as_ref().is_some_and(|m| lt(m, v)) {
            max = Some(v.clone());
        }
    }
    Some(ColumnStats {
        min,
        max,
        null_count: Some(array.null_count() as u64),
        rows: (to - from) as u64,
    })
}

/// `a < b` for literals of one column (one kind).
fn lt(a: &Literal, b: &Literal) -> bool {
    use Literal::*;
    match (a, b) {
        (Int(a), Int(b)) => a < b,
        (Float(a), Float(b)) => a < b,
        (Str(a), Str(b)) => a < b,
        (Bool(a), Bool(b)) => a < b,
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let filter = input.attr(0);
    let Ok(predicate) = Predicate::parse("fuzz", &filter) else {
        return;
    };
    let again = Predicate::parse("fuzz", &predicate.to_attr()).expect("a filter's own form parses");
    assert_eq!(again, predicate, "attribute round trip");
    let batch = table(&mut input);
    if predicate.check("fuzz", &batch.schema()).is_err() {
        return;
    }
    let Ok(mask) = predicate.mask(&batch) else {
        return;
    };
    assert_eq!(mask.len(), batch.num_rows());
    // Pruning never loses a row: each kept row's own statistics, and those
    // of every run of rows holding it, may match.
    for (row, keep) in mask.iter().enumerate() {
        if !keep {
            continue;
        }
        for (from, to) in [(row, row + 1), (0, batch.num_rows()), (row.saturating_sub(2), row + 1)] {
            assert!(
                predicate.may_match(&|c| stats(&batch, c, from, to)),
                "row {row} matches, but the statistics of rows {from}..{to} rule it out"
            );
        }
    }
});
