//! `tfdata status`: the dispatcher's state as tables a person can read.

use std::fmt::Write as _;

use tfdata_proto::tfdata::status::{
    GetStatusRequest, GetStatusResponse, status_service_client::StatusServiceClient,
};

/// Left-aligned columns sized to their widest cell.
fn table(title: &str, header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = format!("{title} ({})\n", rows.len());
    let line = |cells: &[String]| {
        let mut l = String::from("  ");
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let _ = write!(l, "{cell:<w$}");
        }
        l.trim_end().to_string() + "\n"
    };
    out.push_str(&line(
        &header.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
    ));
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

pub fn render(s: &GetStatusResponse, address: &str) -> String {
    let mut out = format!(
        "tf.data service dispatcher {address} (protocol {}, {})\n\n",
        s.protocol_version,
        if s.fault_tolerant {
            "fault tolerant"
        } else {
            "not fault tolerant"
        }
    );
    if let Some(sc) = &s.scaling {
        out += &format!(
            "Scaling: target {} workers ({} live), estimate {}, {} (decided every {:.1}s; {} changes, {} reverted)\n  {}\n\n",
            sc.target_workers,
            sc.live_workers,
            if sc.measured {
                sc.estimate.to_string()
            } else {
                "not measured".into()
            },
            sc.phase,
            sc.period_ms as f64 / 1000.0,
            sc.decisions,
            sc.reverts,
            sc.reason,
        );
    }
    out += &table(
        "Workers",
        &["ADDRESS", "STATE", "TAGS", "LAST HEARTBEAT", "TASKS"],
        s.workers
            .iter()
            .map(|w| {
                vec![
                    w.address.clone(),
                    if w.lost { "lost" } else { "alive" }.into(),
                    w.tags.join(","),
                    if w.last_heartbeat_age_ms < 0 {
                        "-".into()
                    } else {
                        format!("{:.1}s ago", w.last_heartbeat_age_ms as f64 / 1000.0)
                    },
                    w.assigned_tasks.to_string(),
                ]
            })
            .collect(),
    );
    out += "\n";
    out += &table(
        "Datasets",
        &["ID", "COMPRESSION", "CARDINALITY", "ELEMENT SPEC"],
        s.datasets
            .iter()
            .map(|d| {
                let card = match d.cardinality {
                    -1 => "infinite".to_string(),
                    -2 => "unknown".to_string(),
                    n => n.to_string(),
                };
                vec![
                    d.dataset_id.clone(),
                    d.compression.clone(),
                    card,
                    d.element_spec.clone(),
                ]
            })
            .collect(),
    );
    out += "\n";
    out += &table(
        "Jobs",
        &[
            "ID",
            "NAME",
            "DATASET",
            "MODE",
            "CONSUMERS",
            "TARGET",
            "CROSS-TRAINER CACHE",
        ],
        s.jobs
            .iter()
            .map(|j| {
                vec![
                    j.job_id.to_string(),
                    j.name.clone(),
                    j.dataset_id.clone(),
                    j.processing_mode.clone(),
                    j.num_consumers.map_or("-".into(), |n| n.to_string()),
                    j.target_workers.clone(),
                    if j.cross_trainer_cache {
                        "yes".into()
                    } else {
                        "no".into()
                    },
                ]
            })
            .collect(),
    );
    out += "\n";
    out += &table(
        "Iterations",
        &[
            "ID",
            "JOB",
            "REPETITION",
            "CLIENTS",
            "TASKS",
            "PENDING",
            "STATE",
        ],
        s.iterations
            .iter()
            .map(|it| {
                let state = match (it.garbage_collected, it.finished) {
                    (true, _) => "garbage collected",
                    (false, true) => "finished",
                    (false, false) => "running",
                };
                vec![
                    it.iteration_id.to_string(),
                    it.job_id.to_string(),
                    it.repetition.to_string(),
                    it.num_clients.to_string(),
                    it.active_tasks.to_string(),
                    it.pending_tasks.to_string(),
                    state.into(),
                ]
            })
            .collect(),
    );
    out += "\n";
    out += &table(
        "Tasks",
        &["ID", "ITERATION", "WORKER", "STARTING ROUND", "STATE"],
        s.tasks
            .iter()
            .map(|t| {
                vec![
                    t.task_id.to_string(),
                    t.iteration_id.to_string(),
                    t.worker_address.clone(),
                    t.starting_round.to_string(),
                    if t.finished {
                        "finished".into()
                    } else {
                        "running".into()
                    },
                ]
            })
            .collect(),
    );
    out += "\n";
    out += &table(
        "Snapshots",
        &["PATH", "STATE", "SPLITS", "STREAMS"],
        s.snapshots
            .iter()
            .map(|snap| {
                let state = if snap.error.is_empty() {
                    snap.state.clone()
                } else {
                    format!("{}: {}", snap.state, snap.error)
                };
                let streams = snap
                    .streams
                    .iter()
                    .map(|st| format!("{} {}", st.index, st.state))
                    .collect::<Vec<_>>()
                    .join(", ");
                vec![
                    snap.path.clone(),
                    state,
                    format!("{}/{}", snap.assigned_splits, snap.total_splits),
                    if streams.is_empty() {
                        "-".into()
                    } else {
                        streams
                    },
                ]
            })
            .collect(),
    );
    if !s.autocache.is_empty() {
        out += "\n";
        out += &table(
            "Autocache",
            &["DATASET", "STATE", "POINT", "JOBS SERVED", "WHY"],
            s.autocache
                .iter()
                .map(|a| {
                    vec![
                        a.dataset_id.clone(),
                        a.state.clone(),
                        if a.point.is_empty() {
                            "-".into()
                        } else {
                            a.point.clone()
                        },
                        a.jobs_served.to_string(),
                        a.reason.clone(),
                    ]
                })
                .collect(),
        );
    }
    out
}

pub async fn run(dispatcher: &str) -> anyhow::Result<()> {
    let (_protocol, address) = tfdata_rpc::channel::parse_service(dispatcher)?;
    let security = tfdata_rpc::security::TransportSecurity::process_default()?.client()?;
    let channel = tfdata_rpc::channel::channel(&address, &security)?;
    let mut client = StatusServiceClient::new(channel);
    let status = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.get_status(GetStatusRequest {}),
    )
    .await
    .map_err(|_| anyhow::anyhow!("no answer from the dispatcher at {address} within 10 s"))?
    .map_err(|s| anyhow::anyhow!("cannot read the status of {address}: {}", s.message()))?
    .into_inner();
    print!("{}", render(&status, &address));
    Ok(())
}

#[cfg(test)]
mod tests {
    use tfdata_proto::tfdata::status::ScalingAdvice;

    use super::*;

    #[test]
    fn the_scaling_advice_is_shown_when_there_is_one() {
        let mut s = GetStatusResponse::default();
        assert!(!render(&s, "d:1").contains("Scaling"));
        s.scaling = Some(ScalingAdvice {
            target_workers: 4,
            live_workers: 1,
            estimate: 4,
            measured: true,
            phase: "probing up".into(),
            reason: "readers starve 50.0% (>= 5%), estimate 4: 1 -> 4".into(),
            period_ms: 5000,
            decisions: 1,
            ..Default::default()
        });
        let text = render(&s, "d:1");
        assert!(
            text.contains("Scaling: target 4 workers (1 live), estimate 4, probing up (decided every 5.0s; 1 changes, 0 reverted)\n  readers starve"),
            "{text}"
        );
    }
}
