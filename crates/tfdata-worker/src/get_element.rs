//! `GetElement`'s logic: a read request, validated from its wire message,
//! answered by the task's strategy for it (rounds for coordinated reads, the
//! trainer's window for a cross-trainer cache, first come, first served
//! otherwise), and the first end of a task's data reported as its
//! completion. The wire answer is [`crate::grpc`]'s.

use tfdata_core::{Error, Result, TaskId};
use tfdata_proto::data as wire;

use crate::strategy::Next;
use crate::task_table::Lookup;
use crate::worker::Worker;

/// A `GetElement` request, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ElementRequest {
    pub task_id: TaskId,
    /// A coordinated read's consumer and round; `None` for other reads.
    pub round: Option<Round>,
    /// With nothing buffered, answer [`Next::Skip`] at once instead of
    /// waiting.
    pub allow_skip: bool,
    /// The trainer reading, for a cross-trainer-cache task.
    pub trainer_id: String,
}

/// Consumer `consumer`'s element of round `round` (coordinated reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Round {
    pub consumer: i64,
    pub round: i64,
}

impl TryFrom<wire::GetElementRequest> for ElementRequest {
    type Error = Error;

    fn try_from(request: wire::GetElementRequest) -> Result<Self> {
        let round = match (request.consumer_index, request.round_index) {
            (Some(consumer), Some(round)) => Some(Round { consumer, round }),
            (None, None) => None,
            _ => {
                return Err(Error::InvalidArgument(
                    "a coordinated read needs both consumer_index and round_index".into(),
                ));
            }
        };
        Ok(ElementRequest {
            task_id: TaskId(request.task_id),
            round,
            allow_skip: request.allow_skip,
            trainer_id: request.trainer_id,
        })
    }
}

impl Worker {
    /// The next element for `request`, a skip, or the end of sequence (also
    /// for a task the dispatcher deleted).
    pub(crate) async fn get_element(&self, request: &ElementRequest) -> Result<Next> {
        let task = match self.lookup_task(request.task_id)? {
            Lookup::Task(task) => task,
            Lookup::Finished => return Ok(Next::EndOfSequence { first: false }),
        };
        if task.lanes().is_some() {
            return Err(Error::FailedPrecondition(format!(
                "task {} is a deterministic read's (tfdata_deterministic): deterministic reads \
                 need tfdata's element stream (ElementStream with a lane), not GetElement",
                request.task_id
            )));
        }
        let next = tokio::select! {
            next = async {
                match request.round {
                    Some(Round { consumer, round }) => task.next_for_round(consumer, round, request.allow_skip).await,
                    None if task.def.use_cross_trainer_cache => task.next_for_trainer(&request.trainer_id).await,
                    None => task.next(request.allow_skip).await,
                }
            } => next?,
            () = self.shutdown_token().cancelled() => return Err(Error::Cancelled("Worker is shutting down".into())),
        };
        if let Next::EndOfSequence { first: true } = next
            && task.data_ended()
        {
            self.report_completion(request.task_id);
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coordinated_read_names_both_its_consumer_and_its_round() {
        let plain = wire::GetElementRequest {
            task_id: 3,
            allow_skip: true,
            trainer_id: "t".into(),
            ..Default::default()
        };
        assert_eq!(
            ElementRequest::try_from(plain.clone()).unwrap(),
            ElementRequest {
                task_id: TaskId(3),
                round: None,
                allow_skip: true,
                trainer_id: "t".into(),
            }
        );
        let coordinated = wire::GetElementRequest {
            consumer_index: Some(1),
            round_index: Some(5),
            ..plain.clone()
        };
        assert_eq!(
            ElementRequest::try_from(coordinated).unwrap().round,
            Some(Round {
                consumer: 1,
                round: 5
            })
        );
        for (consumer_index, round_index) in [(Some(1), None), (None, Some(5))] {
            let half = wire::GetElementRequest {
                consumer_index,
                round_index,
                ..plain.clone()
            };
            let err = ElementRequest::try_from(half).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            assert!(
                err.to_string()
                    .contains("both consumer_index and round_index"),
                "{err}"
            );
        }
    }
}
