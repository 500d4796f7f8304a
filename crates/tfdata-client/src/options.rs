//! The options of `distribute` / `from_dataset_id`, with TensorFlow's names.

use std::fmt;
use std::str::FromStr;

use tfdata_core::{Error, Result};
use tfdata_proto::data::{self as wire, processing_mode_def::ShardingPolicy};

/// How a dataset is split over workers (TensorFlow's `ShardingPolicy`, plus
/// the legacy names `"parallel_epochs"` and `"distributed_epoch"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessingMode {
    /// Every worker produces the whole dataset (`ShardingPolicy.OFF`).
    ParallelEpochs,
    /// Workers share one pass over the data, split dynamically (`DYNAMIC`).
    DistributedEpoch,
    /// Static sharding by files.
    File,
    /// Static sharding by elements.
    Data,
    /// Static sharding by files, else by elements.
    FileOrData,
    /// Static sharding at `shard(SHARD_HINT, ...)` placeholders.
    Hint,
}

impl ProcessingMode {
    pub fn to_proto(self) -> wire::ProcessingModeDef {
        let policy = match self {
            ProcessingMode::ParallelEpochs => ShardingPolicy::Off,
            ProcessingMode::DistributedEpoch => ShardingPolicy::Dynamic,
            ProcessingMode::File => ShardingPolicy::File,
            ProcessingMode::Data => ShardingPolicy::Data,
            ProcessingMode::FileOrData => ShardingPolicy::FileOrData,
            ProcessingMode::Hint => ShardingPolicy::Hint,
        };
        wire::ProcessingModeDef {
            sharding_policy: policy as i32,
            tfdata_deterministic: None,
            tfdata_autocache: false,
        }
    }
}

impl FromStr for ProcessingMode {
    type Err = Error;
    /// Accepts TensorFlow's legacy strings and the `ShardingPolicy` names.
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "parallel_epochs" | "OFF" => ProcessingMode::ParallelEpochs,
            "distributed_epoch" | "DYNAMIC" => ProcessingMode::DistributedEpoch,
            "FILE" => ProcessingMode::File,
            "DATA" => ProcessingMode::Data,
            "FILE_OR_DATA" => ProcessingMode::FileOrData,
            "HINT" => ProcessingMode::Hint,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "invalid processing_mode {other:?}: expected \"parallel_epochs\", \
                     \"distributed_epoch\" or a ShardingPolicy name"
                )));
            }
        })
    }
}

impl fmt::Display for ProcessingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProcessingMode::ParallelEpochs => "parallel_epochs",
            ProcessingMode::DistributedEpoch => "distributed_epoch",
            ProcessingMode::File => "FILE",
            ProcessingMode::Data => "DATA",
            ProcessingMode::FileOrData => "FILE_OR_DATA",
            ProcessingMode::Hint => "HINT",
        })
    }
}

/// What `distribute` accepts as a processing mode: the enum or a string.
pub trait IntoProcessingMode {
    fn into_processing_mode(self) -> Result<ProcessingMode>;
}

impl IntoProcessingMode for ProcessingMode {
    fn into_processing_mode(self) -> Result<ProcessingMode> {
        Ok(self)
    }
}

impl IntoProcessingMode for &str {
    fn into_processing_mode(self) -> Result<ProcessingMode> {
        self.parse()
    }
}

/// How elements travel from workers to readers (`compression=` of
/// `distribute` / `register_dataset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Snappy, unless the service decides at runtime to turn it off.
    #[default]
    Auto,
    /// Snappy, always.
    Snappy,
    /// No compression (Python's `compression=None`).
    Off,
}

impl Compression {
    pub fn to_metadata(self) -> wire::data_service_metadata::Compression {
        use wire::data_service_metadata::Compression as C;
        match self {
            Compression::Auto => C::Snappy,
            Compression::Snappy => C::ForcedSnappy,
            Compression::Off => C::Off,
        }
    }
}

/// Which workers a reader reads from (`target_workers=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TargetWorkers {
    #[default]
    Auto,
    Any,
    Local,
}

impl TargetWorkers {
    pub fn to_proto(self) -> wire::TargetWorkers {
        match self {
            TargetWorkers::Auto => wire::TargetWorkers::Auto,
            TargetWorkers::Any => wire::TargetWorkers::Any,
            TargetWorkers::Local => wire::TargetWorkers::Local,
        }
    }
}

impl FromStr for TargetWorkers {
    type Err = Error;
    /// Case-insensitive; empty means AUTO, as in TensorFlow.
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "" | "AUTO" => Ok(TargetWorkers::Auto),
            "ANY" => Ok(TargetWorkers::Any),
            "LOCAL" => Ok(TargetWorkers::Local),
            other => Err(Error::InvalidArgument(format!(
                "invalid target_workers {other:?}: expected AUTO, ANY or LOCAL"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processing_modes_parse_like_tensorflow() {
        assert_eq!(
            "parallel_epochs".into_processing_mode().unwrap(),
            ProcessingMode::ParallelEpochs
        );
        assert_eq!(
            "distributed_epoch".into_processing_mode().unwrap(),
            ProcessingMode::DistributedEpoch
        );
        let err = "one_epoch".into_processing_mode().unwrap_err();
        assert!(err.to_string().contains("one_epoch"));
        assert_eq!(
            ProcessingMode::DistributedEpoch.to_proto().sharding_policy,
            1
        );
        assert_eq!(
            "local".parse::<TargetWorkers>().unwrap(),
            TargetWorkers::Local
        );
        assert_eq!("".parse::<TargetWorkers>().unwrap(), TargetWorkers::Auto);
    }
}
