//! `WorkerHeartbeat` as a long poll for our workers ([`super::worker_news`]):
//! the heartbeat is processed when it comes, as every heartbeat is; when
//! the worker asked for a hold and has no news, the answer waits for news,
//! then is computed again from the state.

use std::collections::HashSet;

use tfdata_core::{Error, Result, TaskId};
use tfdata_proto::data as wire;

use super::worker_news::Woken;
use super::{Dispatcher, requests};

impl Dispatcher {
    /// `WorkerHeartbeat` from `peer` ([`Self::worker_heartbeat_from`]),
    /// held while the worker asks for it (`tfdata_hold_ms`, never set by
    /// TensorFlow's workers) and nothing changed its answer since the
    /// answer it last applied (`tfdata_news_seen`).
    pub(crate) async fn worker_heartbeat_held(
        &self,
        req: requests::WorkerHeartbeat,
        peer: Option<std::net::IpAddr>,
    ) -> Result<wire::WorkerHeartbeatResponse> {
        let news = &self.ledger.news;
        let hold = req
            .hold
            .filter(|_| !req.wire().tfdata_stopping && news.holding());
        let asked = Asked {
            worker: req.wire().worker_address.clone(),
            seen: req.wire().tfdata_news_seen,
            current_tasks: req.wire().current_tasks.clone(),
            runs_pipelines: req.wire().tfdata_runs_pipelines,
        };
        // Read before the answer is computed: it includes everything up to here.
        let mut seen = news.now();
        let mut response = self.worker_heartbeat_from(req, peer).await?;
        let Some(bound) = hold else {
            return Ok(response);
        };
        // News since the worker's last answer is in the answer just computed.
        response.tfdata_at_once = news.since(&asked.worker, asked.seen);
        if !response.tfdata_at_once {
            match news.hold(&asked.worker, asked.seen, bound).await {
                // Nothing changed: the answer computed when it came stands.
                Woken::Bound => {}
                Woken::News | Woken::Superseded => {
                    seen = news.now();
                    response = self.heartbeat_answer(&asked).await?;
                }
                Woken::Released => {
                    return Err(Error::Unavailable(
                        "the dispatcher is stopping (or no longer leads); heartbeat again".into(),
                    ));
                }
            }
        }
        response.tfdata_holds = news.holding();
        response.tfdata_news_seen = seen;
        Ok(response)
    }

    /// A held heartbeat's answer, from the state as it is now: the tasks
    /// the worker should start and delete, the snapshot streams it should
    /// write. Nothing its request reported is applied again: that was done
    /// when it came (a draining flag, a stream's end), and a newer
    /// heartbeat may have reported otherwise since.
    async fn heartbeat_answer(&self, asked: &Asked) -> Result<wire::WorkerHeartbeatResponse> {
        let txn = self.ledger.begin().await;
        let current: HashSet<i64> = asked.current_tasks.iter().copied().collect();
        let tasks_to_delete = asked
            .current_tasks
            .iter()
            .copied()
            .filter(|&t| !txn.state.is_assigned(&asked.worker, TaskId(t)))
            .collect();
        let mut new_tasks = Vec::new();
        for task in txn
            .state
            .tasks_for_worker(&asked.worker)
            .filter(|t| !current.contains(&t.id.0))
        {
            new_tasks.push(self.task_def(&txn.state, task)?);
        }
        txn.commit_heartbeat().await?;
        let snapshot_tasks = self
            .snapshot_tasks(&wire::WorkerHeartbeatRequest {
                worker_address: asked.worker.clone(),
                tfdata_runs_pipelines: asked.runs_pipelines,
                ..Default::default()
            })
            .await?;
        Ok(wire::WorkerHeartbeatResponse {
            new_tasks,
            tasks_to_delete,
            snapshot_tasks,
            ..Default::default()
        })
    }

    /// Answers every held heartbeat (`UNAVAILABLE`) and holds none from
    /// now on: the dispatcher stops serving, or lost its leader lease.
    pub fn release_held_heartbeats(&self) {
        self.ledger.news.release();
    }
}

/// What a held heartbeat's answer is computed from.
struct Asked {
    worker: String,
    seen: u64,
    current_tasks: Vec<i64>,
    runs_pipelines: bool,
}
