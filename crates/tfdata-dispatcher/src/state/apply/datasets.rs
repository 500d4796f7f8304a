//! Datasets and jobs: `RegisterDataset`, `CreateJob` and
//! `CompressionDisabledAtRuntime`.

use tfdata_core::{DatasetId, JobId, Result};
use tfdata_proto::data::{
    CompressionDisabledAtRuntimeUpdate, CreateJobUpdate, RegisterDatasetUpdate,
};

use super::bad;
use crate::state::{Dataset, DispatcherState, Job};

impl DispatcherState {
    pub(super) fn apply_register_dataset(&mut self, u: &RegisterDatasetUpdate) -> Result<()> {
        let id = DatasetId(u.dataset_id.clone());
        if id.0.is_empty() || self.datasets.contains_key(&id) {
            return Err(bad(
                "register_dataset",
                format!("dataset id {id:?} taken or empty"),
            ));
        }
        self.datasets.insert(
            id.clone(),
            Dataset {
                id,
                metadata: u.metadata.clone().unwrap_or_default(),
                compression_disabled_at_runtime: None,
                is_pipeline: u.tfdata_pipeline,
                tfdata_runs_graph: !u.tfdata_pipeline && u.tfdata_workers_run_graph,
                unsupported_ops: u.tfdata_unsupported_ops.clone(),
                tensorflow_cannot_run: !u.tfdata_pipeline && u.tfdata_tensorflow_cannot_run,
            },
        );
        // TensorFlow's UpdateNextAvailableDatasetId.
        while self
            .datasets
            .contains_key(&DatasetId(self.next_dataset_id.to_string()))
        {
            self.next_dataset_id += 1;
        }
        Ok(())
    }

    pub(super) fn apply_create_job(&mut self, u: &CreateJobUpdate) -> Result<()> {
        let id = JobId(u.job_id);
        if self.jobs.contains_key(&id) || self.jobs_by_name.contains_key(&u.job_name) {
            return Err(bad(
                "create_job",
                format!("job {id} / {:?} exists", u.job_name),
            ));
        }
        if !self.datasets.contains_key(&DatasetId(u.dataset_id.clone())) {
            return Err(bad(
                "create_job",
                format!("unknown dataset {}", u.dataset_id),
            ));
        }
        if let Some(d) = u
            .processing_mode_def
            .as_ref()
            .and_then(|m| m.tfdata_deterministic.as_ref())
            && let Err(reason) = crate::state::check_deterministic(
                u.processing_mode_def.map_or(0, |m| m.sharding_policy),
                d,
            )
        {
            return Err(bad("create_job", reason));
        }
        self.next_job_id = self.next_job_id.max(u.job_id.saturating_add(1));
        self.jobs_by_name.insert(u.job_name.clone(), id);
        self.jobs.insert(
            id,
            Job {
                id,
                name: u.job_name.clone(),
                dataset_id: DatasetId(u.dataset_id.clone()),
                processing_mode: u.processing_mode_def.unwrap_or_default(),
                num_consumers: u.num_consumers,
                target_workers: u.target_workers,
                use_cross_trainer_cache: u.use_cross_trainer_cache,
            },
        );
        Ok(())
    }

    pub(super) fn apply_compression_disabled_at_runtime(
        &mut self,
        u: &CompressionDisabledAtRuntimeUpdate,
    ) -> Result<()> {
        let ds = self
            .datasets
            .get_mut(&DatasetId(u.dataset_id.clone()))
            .ok_or_else(|| {
                bad(
                    "compression_disabled_at_runtime",
                    format!("unknown dataset {}", u.dataset_id),
                )
            })?;
        ds.compression_disabled_at_runtime
            .get_or_insert(u.compression_disabled);
        Ok(())
    }
}
