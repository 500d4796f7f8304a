//! `DecodeCSV` (`tf.io.decode_csv`): each record's fields split as
//! TensorFlow's `ExtractFields` splits them (quotes, escaped quotes, a
//! selection of columns), then converted to each column's dtype with its
//! default for empty fields. A module of its own because it shares nothing
//! with Example parsing but the number syntax of `safe_strto*`
//! ([`super::strings`]), which `CSVDataset` reads too.

use bytes::Bytes;
use tfdata_core::{DType, Result, Tensor};

use super::strings::{invalid, parse_f32, parse_float, parse_int, strings};
use super::{Compute, KernelDef, check_size};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "DecodeCSV",
    outputs: |a| Ok(vec![("output", a.dtype_codes("OUT_TYPE")?.len())]),
    build: decode_csv,
}];

struct Csv {
    types: Vec<DType>,
    delim: u8,
    quote: bool,
    na: Vec<u8>,
    select: Vec<usize>,
}

const OP_CSV: &str = "DecodeCSV";

fn decode_csv(attrs: &NodeAttrs) -> Result<Compute> {
    let types = attrs.dtypes("OUT_TYPE")?;
    for t in &types {
        if !matches!(
            t,
            DType::Int32 | DType::Int64 | DType::Float | DType::Double | DType::String
        ) {
            return Err(invalid(
                OP_CSV,
                format!(
                    "Value for attr 'OUT_TYPE' of {t} is not in the list of allowed values: float, double, int32, int64, string"
                ),
            ));
        }
    }
    let delim = if attrs.has("field_delim") {
        attrs.bytes("field_delim")?
    } else {
        b","
    };
    let [delim] = delim else {
        return Err(invalid(OP_CSV, "field_delim should be only 1 char"));
    };
    let select = if attrs.has("select_cols") {
        attrs.ints("select_cols")?.to_vec()
    } else {
        Vec::new()
    };
    if select.iter().any(|&c| c < 0) {
        return Err(invalid(
            OP_CSV,
            "select_cols should be non-negative indices",
        ));
    }
    if select.windows(2).any(|w| w[0] >= w[1]) {
        return Err(invalid(
            OP_CSV,
            "select_cols should be strictly increasing indices",
        ));
    }
    if !select.is_empty() && select.len() != types.len() {
        return Err(invalid(OP_CSV, "select_cols should match output size"));
    }
    let csv = Csv {
        types,
        delim: *delim,
        quote: attrs.bool_or("use_quote_delim", true)?,
        na: if attrs.has("na_value") {
            attrs.bytes("na_value")?.to_vec()
        } else {
            Vec::new()
        },
        select: select.into_iter().map(|c| c as usize).collect(),
    };
    Ok(Box::new(move |inputs| csv.run(inputs)))
}

impl Csv {
    /// TensorFlow's `ExtractFields`: the record's (selected) fields.
    fn fields(&self, input: &[u8]) -> Result<Vec<Vec<u8>>> {
        let err = |m: &str| invalid(OP_CSV, m);
        let mut out = Vec::new();
        let (mut i, mut parsed, mut selected) = (0usize, 0usize, 0usize);
        let all = self.select.is_empty();
        let wanted =
            |parsed: usize, selected: usize| all || self.select.get(selected) == Some(&parsed);
        if input.is_empty() {
            return Ok(out);
        }
        while i < input.len() {
            if input[i] == b'\n' || input[i] == b'\r' {
                i += 1;
                continue;
            }
            let include = wanted(parsed, selected);
            let mut field = Vec::new();
            if self.quote && input[i] == b'"' {
                i += 1;
                while i + 1 < input.len() && (input[i] != b'"' || input[i + 1] != self.delim) {
                    if input[i] != b'"' {
                        field.push(input[i]);
                        i += 1;
                    } else if input[i + 1] == b'"' {
                        field.push(b'"');
                        i += 2;
                    } else {
                        return Err(err(
                            "Quote inside a string has to be escaped by another quote",
                        ));
                    }
                }
                if !(i < input.len()
                    && input[i] == b'"'
                    && (i == input.len() - 1 || input[i + 1] == self.delim))
                {
                    return Err(err(
                        "Quoted field has to end with quote followed by delim or end",
                    ));
                }
                i += 2;
            } else {
                while i < input.len() && input[i] != self.delim {
                    let c = input[i];
                    if (self.quote && c == b'"') || c == b'\n' || c == b'\r' {
                        return Err(err("Unquoted fields cannot have quotes/CRLFs inside"));
                    }
                    field.push(c);
                    i += 1;
                }
                i += 1;
            }
            parsed += 1;
            if include {
                out.push(field);
                selected += 1;
                if !all && selected == self.select.len() {
                    return Ok(out);
                }
                // A million-field record is refused before it is stored.
                check_size(OP_CSV, DType::String, out.len() as u64)?;
            }
        }
        if wanted(parsed, selected) && input.last() == Some(&self.delim) {
            out.push(Vec::new());
        }
        Ok(out)
    }

    fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let n = self.types.len();
        super::expect_inputs(OP_CSV, &inputs, 1 + n)?;
        let records = strings(OP_CSV, &inputs[0], "records")?;
        let defaults = &inputs[1..];
        for (f, d) in defaults.iter().enumerate() {
            if d.shape().len() > 1 {
                return Err(invalid(
                    OP_CSV,
                    "Each record default should be at most rank 1",
                ));
            }
            if d.num_elements() > 1 {
                return Err(invalid(
                    OP_CSV,
                    format!(
                        "There should only be 1 default per field but field {f} has {}",
                        d.num_elements()
                    ),
                ));
            }
            if d.dtype() != self.types[f] {
                return Err(invalid(
                    OP_CSV,
                    format!(
                        "record_defaults[{f}] must be {}, got {}",
                        self.types[f],
                        d.dtype()
                    ),
                ));
            }
        }
        check_size(OP_CSV, DType::String, records.len() as u64 * n as u64)?;
        // `None` marks a missing field, which takes its column's default.
        let mut columns: Vec<Vec<Option<Bytes>>> = vec![Vec::with_capacity(records.len()); n];
        for (r, record) in records.iter().enumerate() {
            let fields = self.fields(record)?;
            if fields.len() != n {
                return Err(invalid(
                    OP_CSV,
                    format!("Expect {n} fields but have {} in record {r}", fields.len()),
                ));
            }
            for (f, field) in fields.into_iter().enumerate() {
                if field.is_empty() || field == self.na {
                    if defaults[f].num_elements() == 0 {
                        return Err(invalid(
                            OP_CSV,
                            format!("Field {f} is required but missing in record {r}!"),
                        ));
                    }
                    columns[f].push(None);
                } else {
                    columns[f].push(Some(Bytes::from(field)));
                }
            }
        }
        let shape = inputs[0].shape().to_vec();
        columns
            .into_iter()
            .enumerate()
            .map(|(f, col)| self.column(f, col, &defaults[f], shape.clone()))
            .collect()
    }

    fn column(
        &self,
        f: usize,
        col: Vec<Option<Bytes>>,
        default: &Tensor,
        shape: Vec<i64>,
    ) -> Result<Tensor> {
        let bad = |r: usize, v: &Bytes, what: &str| {
            invalid(
                OP_CSV,
                format!(
                    "Field {f} in record {r} is not a valid {what}: {}",
                    String::from_utf8_lossy(v)
                ),
            )
        };
        macro_rules! numbers {
            ($t:ty, $what:expr, $parse:expr) => {{
                let d: Option<$t> = default.to_vec::<$t>()?.first().copied();
                let v = col
                    .iter()
                    .enumerate()
                    .map(|(r, v)| match v {
                        None => d.ok_or_else(|| bad(r, &Bytes::new(), $what)),
                        Some(v) => $parse(v).ok_or_else(|| bad(r, v, $what)),
                    })
                    .collect::<Result<Vec<$t>>>()?;
                Tensor::from_slice(&v, shape)
            }};
        }
        match self.types[f] {
            DType::Int32 => numbers!(i32, "int32", |v: &Bytes| parse_int(v)
                .and_then(|x| i32::try_from(x).ok())),
            DType::Int64 => numbers!(i64, "int64", |v: &Bytes| parse_int(v)),
            DType::Float => numbers!(f32, "float", |v: &Bytes| parse_f32(v)),
            DType::Double => numbers!(f64, "double", |v: &Bytes| parse_float(v)),
            _ => {
                let d = default
                    .string_values()?
                    .first()
                    .cloned()
                    .unwrap_or_default();
                let v = col
                    .into_iter()
                    .map(|v| v.unwrap_or_else(|| d.clone()))
                    .collect();
                Tensor::strings(v, shape)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tfdata_core::{DType, Result, Tensor};
    use tfdata_proto::tensorflow::AttrValue;
    use tfdata_proto::tensorflow::attr_value::ListValue;

    use super::super::testing::{boolean, err, list, run, string, svec, types};

    fn defaults() -> Vec<Tensor> {
        vec![
            Tensor::vector(&[1i32]),
            Tensor::from_slice::<f32>(&[], vec![0]).unwrap(),
            Tensor::strings(vec![Bytes::from_static(b"d")], vec![1]).unwrap(),
            Tensor::vector(&[2i64]),
            Tensor::vector(&[0.5f64]),
        ]
    }

    fn csv(
        records: Tensor,
        defaults: Vec<Tensor>,
        attrs: &[(&str, AttrValue)],
    ) -> Result<Vec<Tensor>> {
        let types: Vec<DType> = defaults.iter().map(Tensor::dtype).collect();
        let mut a = vec![("OUT_TYPE", super::tests::types(&types))];
        a.extend(attrs.iter().cloned());
        let mut inputs = vec![records];
        inputs.extend(defaults);
        run("DecodeCSV", &a, inputs)
    }

    #[test]
    fn decode_csv_matches_tensorflow() {
        let out = csv(
            svec(&[
                b"1,2.5,abc,4,5",
                b",3,,,",
                br#""7","1e3","a,""b""",9223372036854775807,-1e300"#,
            ]),
            defaults(),
            &[],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), [1, 1, 7]);
        assert_eq!(out[1].to_vec::<f32>().unwrap(), [2.5, 3.0, 1000.0]);
        assert_eq!(out[2].string_values().unwrap(), ["abc", "d", "a,\"b\""]);
        assert_eq!(out[3].to_vec::<i64>().unwrap(), [4, 2, i64::MAX]);
        assert_eq!(out[4].to_vec::<f64>().unwrap(), [5.0, 0.5, -1e300]);

        let one = |r: &[u8], attrs: &[(&str, AttrValue)]| csv(svec(&[r]), defaults(), attrs);
        let out = one(b" 1 , 2.5 , abc , 4 , 5 ", &[]).unwrap();
        assert_eq!(out[2].string_values().unwrap(), [" abc "]);
        assert_eq!(out[0].to_vec::<i32>().unwrap(), [1]);
        let out = one(b"NA,2,NA,NA,NA", &[("na_value", string("NA"))]).unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), [1]);
        assert_eq!(out[2].string_values().unwrap(), ["d"]);
        let out = one(br#"1,2,"ab",4,5"#, &[("use_quote_delim", boolean(false))]).unwrap();
        assert_eq!(out[2].string_values().unwrap(), ["\"ab\""]);
        let out = one(b"1|2|x|4|5", &[("field_delim", string("|"))]).unwrap();
        assert_eq!(out[2].string_values().unwrap(), ["x"]);
        let out = one(b"1,2,abc,4,", &[]).unwrap();
        assert_eq!(out[4].to_vec::<f64>().unwrap(), [0.5]);
        let out = one(b"0x10,0x10,a,010,inf", &[]);
        assert_eq!(
            err(out),
            "DecodeCSV: Field 0 in record 0 is not a valid int32: 0x10"
        );
        let out = one(b"1,0x10,a,010,inf", &[]).unwrap();
        assert_eq!(out[1].to_vec::<f32>().unwrap(), [16.0]);
        assert_eq!(out[3].to_vec::<i64>().unwrap(), [10]);
        assert_eq!(out[4].to_vec::<f64>().unwrap(), [f64::INFINITY]);

        for (record, message) in [
            (
                &b"1,,abc,4,5"[..],
                "Field 1 is required but missing in record 0!",
            ),
            (b"1,2.5,abc", "Expect 5 fields but have 3 in record 0"),
            (b"1,2.5,abc,4,5,6", "Expect 5 fields but have 6 in record 0"),
            (b"", "Expect 5 fields but have 0 in record 0"),
            (
                b"x,2.5,abc,4,5",
                "Field 0 in record 0 is not a valid int32: x",
            ),
            (
                b"1,x,abc,4,5",
                "Field 1 in record 0 is not a valid float: x",
            ),
            (
                b"1,2,abc,4.5,5",
                "Field 3 in record 0 is not a valid int64: 4.5",
            ),
            (
                b"1,2,abc,4,zz",
                "Field 4 in record 0 is not a valid double: zz",
            ),
            (
                b"1,2,a\"b,4,5",
                "Unquoted fields cannot have quotes/CRLFs inside",
            ),
            (
                b"1,2,\"ab\"c,4,5",
                "Quote inside a string has to be escaped by another quote",
            ),
            (
                b"1,2,\"abc,4,5",
                "Quoted field has to end with quote followed by delim or end",
            ),
            (
                b"1,2,abc,4,5\r\n",
                "Unquoted fields cannot have quotes/CRLFs inside",
            ),
        ] {
            assert_eq!(
                err(one(record, &[])),
                format!("DecodeCSV: {message}"),
                "{record:?}"
            );
        }
    }

    #[test]
    fn decode_csv_shapes_selection_and_defaults() {
        let two = |r: &[u8], d: Vec<Tensor>, attrs: &[(&str, AttrValue)]| csv(svec(&[r]), d, attrs);
        let sel = || {
            list(ListValue {
                i: vec![1, 3],
                ..Default::default()
            })
        };
        let out = two(
            b"9,1,8,2.5",
            vec![Tensor::vector(&[1i32]), Tensor::vector(&[0f32])],
            &[("select_cols", sel())],
        )
        .unwrap();
        assert_eq!(
            (
                out[0].to_vec::<i32>().unwrap(),
                out[1].to_vec::<f32>().unwrap()
            ),
            (vec![1], vec![2.5])
        );
        let out = two(
            b"9,1,8,",
            vec![Tensor::vector(&[1i32]), Tensor::vector(&[0.5f32])],
            &[("select_cols", sel())],
        )
        .unwrap();
        assert_eq!(out[1].to_vec::<f32>().unwrap(), [0.5]);
        let unsorted = list(ListValue {
            i: vec![1, 0],
            ..Default::default()
        });
        assert!(
            two(
                b"1,2",
                vec![Tensor::vector(&[1i32])],
                &[("select_cols", unsorted)]
            )
            .is_err()
        );
        let out = two(b",", vec![Tensor::scalar(1i32), Tensor::scalar(2i32)], &[]).unwrap();
        assert_eq!(
            (
                out[0].to_vec::<i32>().unwrap(),
                out[1].to_vec::<i32>().unwrap()
            ),
            (vec![1], vec![2])
        );
        let s =
            |v: &str| Tensor::strings(vec![Bytes::copy_from_slice(v.as_bytes())], vec![1]).unwrap();
        let none = || Tensor::strings(vec![], vec![0]).unwrap();
        let out = two(b"\"\",a", vec![s("q"), none()], &[]).unwrap();
        assert_eq!(out[0].string_values().unwrap(), ["q"]);
        let out = two(b"\"a\nb\",c", vec![s("q"), none()], &[]).unwrap();
        assert_eq!(out[0].string_values().unwrap(), ["a\nb"]);
        let out = two(b"\na,c", vec![s("q"), none()], &[]).unwrap();
        assert_eq!(out[0].string_values().unwrap(), ["a"]);
        assert_eq!(
            err(two(b"a,", vec![none(), none()], &[])),
            "DecodeCSV: Field 1 is required but missing in record 0!"
        );
        assert_eq!(
            err(two(b"a,c", vec![s("q")], &[("field_delim", string("ab"))])),
            "DecodeCSV: field_delim should be only 1 char"
        );
        assert_eq!(
            err(two(b"1", vec![Tensor::vector(&[1i32, 2])], &[])),
            "DecodeCSV: There should only be 1 default per field but field 0 has 2"
        );
        let grid = Tensor::strings(
            vec![
                Bytes::from_static(b"1,2,a,4,5"),
                Bytes::from_static(b"3,4,b,5,6"),
            ],
            vec![2, 1],
        )
        .unwrap();
        let out = csv(grid, defaults(), &[]).unwrap();
        assert_eq!(out[0].shape(), [2, 1]);
        assert_eq!(out[3].to_vec::<i64>().unwrap(), [4, 5]);
        let out = csv(Tensor::scalar_string("1,2,a,4,5"), defaults(), &[]).unwrap();
        assert!(out[0].shape().is_empty());
    }
}
