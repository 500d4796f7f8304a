//! Retrying transient failures with TensorFlow's back-off (spec §4.1).

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use tfdata_core::{Error, Result};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const MIN_BACKOFF: Duration = Duration::from_millis(1);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// TensorFlow's `ComputeRetryBackoff`: `0.4·min + U[0.6,1.0]·min(min·1.3^n,
/// max − 0.4·min)`, never below `min`.
pub fn backoff(attempt: u32) -> Duration {
    let min = MIN_BACKOFF.as_secs_f64();
    let max = MAX_BACKOFF.as_secs_f64();
    let factor: f64 = rand::rng().random_range(0.6..=1.0);
    let grown = (min * 1.3f64.powi(attempt.min(100) as i32)).min(max - 0.4 * min);
    Duration::from_secs_f64((0.4 * min + factor * grown).max(min))
}

/// What a retried call talks to, for the error when it gives up.
#[derive(Debug, Clone)]
pub struct Target {
    pub what: &'static str,
    pub address: String,
}

/// Calls `f` until it succeeds, fails with a non-transient error, `deadline`
/// passes (then [`Error::Unreachable`] naming the target and the last error),
/// or `cancel` fires ([`Error::Cancelled`]). `deadline = None` retries forever.
pub async fn retry<T, F, Fut>(
    target: &Target,
    deadline: Option<Duration>,
    cancel: &CancellationToken,
    mut f: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let start = Instant::now();
    let mut attempt = 0u32;
    loop {
        let outcome = tokio::select! {
            outcome = f() => outcome,
            () = cancel.cancelled() => return Err(cancelled(target)),
        };
        let err = match outcome {
            Ok(v) => return Ok(v),
            Err(e) if e.is_retryable() => e,
            Err(e) => return Err(e),
        };
        let elapsed = start.elapsed();
        let wait = backoff(attempt);
        attempt += 1;
        if let Some(limit) = deadline
            && elapsed + wait > limit
        {
            return Err(Error::Unreachable {
                what: target.what,
                address: target.address.clone(),
                after: limit,
                cause: err.to_string(),
            });
        }
        if attempt % 50 == 1 {
            tracing::debug!(what = target.what, address = %target.address, error = %err, "retrying");
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancel.cancelled() => return Err(cancelled(target)),
        }
    }
}

fn cancelled(target: &Target) -> Error {
    Error::Cancelled(format!(
        "call to {} at {} cancelled",
        target.what, target.address
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        assert!(backoff(0) >= MIN_BACKOFF);
        assert!(backoff(0) <= Duration::from_millis(2));
        assert!(backoff(1000) <= MAX_BACKOFF);
        assert!(backoff(1000) >= Duration::from_secs(5));
    }

    fn target() -> Target {
        Target {
            what: "test peer",
            address: "nowhere:1".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_errors_until_success() {
        let calls = AtomicU32::new(0);
        let out = retry(
            &target(),
            Some(Duration::from_secs(60)),
            &CancellationToken::new(),
            || async {
                if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(Error::Unavailable("not yet".into()))
                } else {
                    Ok(7)
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(out, 7);
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_at_the_deadline_and_on_fatal_errors() {
        let err = retry(
            &target(),
            Some(Duration::from_secs(3)),
            &CancellationToken::new(),
            || async { Err::<(), _>(Error::Unavailable("connection refused".into())) },
        )
        .await
        .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Unreachable { .. }), "{msg}");
        assert!(
            msg.contains("nowhere:1") && msg.contains("connection refused"),
            "{msg}"
        );

        let calls = AtomicU32::new(0);
        let err = retry(&target(), None, &CancellationToken::new(), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(Error::not_found("dataset", "9"))
        })
        .await
        .unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_stops_retrying() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let err = retry(&target(), None, &cancel, || async {
            Err::<(), _>(Error::Unavailable("x".into()))
        })
        .await
        .unwrap_err();
        assert!(matches!(err, Error::Cancelled(_)));
    }
}
