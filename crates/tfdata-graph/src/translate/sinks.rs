//! Ops that consume a whole dataset into a file: `DatasetToTFRecord` and
//! `ExperimentalDatasetToTFRecord` (`tf.data.experimental.TFRecordWriter`),
//! which write each element (one scalar string) as a TFRecord, through the
//! engine's file systems and its TFRecord writer (what TensorFlow reads).
//!
//! They run where the graph calls them: in a function body, once per call,
//! iterating the dataset to its end.

use std::sync::Arc;

use tfdata_core::{DType, Error, Result};
use tfdata_dataset::Dataset;
use tfdata_dataset::io::{CompressionType, TfRecordWriter};
use tfdata_proto::tensorflow::NodeDef;

use super::node::Inputs;
use crate::function::CompiledNode;

/// The ops this module translates.
pub(super) const OPS: &[&str] = &["DatasetToTFRecord", "ExperimentalDatasetToTFRecord"];

/// The node's translation, if it is one of [`OPS`].
pub(super) fn compile(node: &NodeDef) -> Option<CompiledNode> {
    if !OPS.contains(&node.op.as_str()) {
        return None;
    }
    let (name, op) = (node.name.clone(), node.op.clone());
    Some(CompiledNode {
        outputs: Vec::new(),
        run: Arc::new(move |values| {
            let mut i = Inputs::new(values, &name, &op);
            let dataset = i.dataset()?;
            let filename = i.tensor("filename")?;
            let compression = i.tensor("compression_type")?;
            let filename = scalar_string(&filename, "filename")?;
            let compression = scalar_string(&compression, "compression_type")?;
            write_tfrecords(&dataset, &filename, &compression)?;
            Ok(Vec::new())
        }),
    })
}

fn scalar_string(t: &tfdata_core::Tensor, what: &str) -> Result<String> {
    match t.string_values() {
        Ok([s]) if t.shape().is_empty() => Ok(String::from_utf8_lossy(s).into_owned()),
        _ => Err(Error::InvalidArgument(format!("{what} must be a scalar"))),
    }
}

/// TensorFlow's refusal of an element that is not one string.
fn check_components(dtypes: &[DType]) -> Result<()> {
    if dtypes.len() != 1 {
        return Err(Error::InvalidArgument(format!(
            "ToTFRecordOp currently only support datasets of 1 single column, but got {}",
            dtypes.len()
        )));
    }
    if dtypes[0] != DType::String {
        return Err(Error::InvalidArgument(format!(
            "ToTFRecordOp currently only supports DT_STRING dataypes, but got {}",
            tf_name(dtypes[0])
        )));
    }
    Ok(())
}

/// TensorFlow's `DataTypeString`.
fn tf_name(d: DType) -> &'static str {
    match d {
        DType::Float => "float",
        DType::Double => "double",
        DType::Half => "half",
        other => other.name(),
    }
}

/// Writes every element of `dataset` to `path` as a TFRecord.
fn write_tfrecords(dataset: &Dataset, path: &str, compression: &str) -> Result<()> {
    // TensorFlow checks the element's dtypes before it creates the file.
    if let Some(spec) = dataset.element_spec()? {
        let dtypes: Vec<DType> = spec.flatten().iter().map(|s| s.dtype).collect();
        check_components(&dtypes)?;
    }
    // TensorFlow writes an unknown compression type (even "gzip")
    // uncompressed and logs it; tfdata refuses it, as its readers do
    // (`CompressionType::parse`): a typo would make a file that the
    // reader naming the same type cannot read.
    let compression = CompressionType::parse(compression)?;
    let mut it = dataset.iter()?;
    let mut writer = TfRecordWriter::create(path, compression)?;
    // Ends with the dataset: an infinite one writes until the disk is full,
    // as TensorFlow's does.
    while let Some(element) = it.next_element()? {
        let dtypes: Vec<DType> = element.components.iter().map(|c| c.dtype()).collect();
        check_components(&dtypes)?;
        let record = &element.components[0];
        match record.string_values()? {
            [s] if record.shape().is_empty() => writer.write(s)?,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "ToTFRecordOp writes scalar strings, but an element has shape {:?}",
                    record.shape()
                )));
            }
        }
    }
    writer.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_core::Tensor;
    use tfdata_dataset::io::TfRecordReader;

    #[test]
    fn every_sink_is_a_dataset_op() {
        for op in OPS {
            assert!(super::super::DATASET_OPS.contains(op), "{op}");
        }
    }

    #[test]
    fn writes_records_tensorflow_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let records = Tensor::strings(
            vec!["".into(), "a".into(), vec![9u8; 70_000].into()],
            vec![3],
        )
        .unwrap();
        let ds = Dataset::from_tensor_slices(vec![records.clone()]);
        for compression in ["", "GZIP", "ZLIB"] {
            let path = format!("{}/out{compression}.tfrecord", dir.path().display());
            write_tfrecords(&ds, &path, compression).unwrap();
            let read: Vec<_> =
                TfRecordReader::open(&path, CompressionType::parse(compression).unwrap())
                    .unwrap()
                    .collect::<Result<_>>()
                    .unwrap();
            assert_eq!(read, records.string_values().unwrap());
        }
        let ints = Dataset::from_tensor_slices(vec![Tensor::vector(&[1i64, 2])]);
        let path = format!("{}/ints", dir.path().display());
        let err = write_tfrecords(&ints, &path, "").unwrap_err();
        assert!(
            err.to_string()
                .contains("only supports DT_STRING dataypes, but got int64"),
            "{err}"
        );
        assert!(write_tfrecords(&ds, &path, "gzip").is_err());
    }
}
