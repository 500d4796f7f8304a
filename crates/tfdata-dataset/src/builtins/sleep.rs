//! `sleep`: waits `ms` milliseconds per element and passes it on unchanged.
//! It simulates a per-element cost that is latency, not CPU (a remote
//! read, a feature-store lookup), so tests and benchmarks on a small
//! machine can make a worker slow without using its cores: how many
//! workers a reader needs then depends on the latency, not the machine.
//! Deterministic: the element is not touched.

use std::sync::Arc;
use std::time::Duration;

use tfdata_core::{Error, Result};

use crate::attrs::Attrs;
use crate::functions::ResolvedMap;
use crate::spec::Structure;

/// The longest sleep per element: longer is a mistake, not a simulation,
/// and would hold a pipeline thread past any drain or cancellation.
pub const MAX_SLEEP_MS: f64 = 10_000.0;

pub(super) fn sleep(args: &Attrs, input: Option<&Structure>) -> Result<ResolvedMap> {
    const NAME: &str = "sleep";
    args.check_known(NAME, &["ms"])?;
    let ms = args.float(NAME, "ms")?;
    if !(0.0..=MAX_SLEEP_MS).contains(&ms) {
        return Err(Error::InvalidArgument(format!(
            "sleep: ms must be between 0 and {MAX_SLEEP_MS}, got {ms}"
        )));
    }
    let pause = Duration::from_secs_f64(ms / 1000.0);
    Ok(ResolvedMap {
        f: Arc::new(move |e| {
            std::thread::sleep(pause);
            Ok(e)
        }),
        output: input.cloned(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use crate::json::from_json;

    fn pipeline(args: &str, stop: i64) -> tfdata_core::Result<crate::json::JsonPipeline> {
        from_json(&format!(
            r#"{{"op": "map", "function": {{"function": "sleep", "args": {args}}},
                "input": {{"op": "range", "stop": {stop}}}}}"#
        ))
    }

    #[test]
    fn sleep_passes_elements_on_after_the_pause() {
        let p = pipeline(r#"{"ms": 20}"#, 5).unwrap();
        let started = Instant::now();
        let mut it = p.dataset.iter().unwrap();
        let mut values = Vec::new();
        while let Some(e) = it.next_element().unwrap() {
            values.push(e.components[0].to_scalar::<i64>().unwrap());
        }
        assert_eq!(values, vec![0, 1, 2, 3, 4]);
        let elapsed = started.elapsed().as_secs_f64();
        assert!(elapsed >= 0.1, "5 x 20 ms took {elapsed} s");
    }

    #[test]
    fn sleep_refuses_bad_arguments() {
        for (args, want) in [
            (r#"{}"#, "ms"),
            (r#"{"ms": -1}"#, "between 0"),
            (r#"{"ms": 100000}"#, "between 0"),
            (r#"{"ms": 1, "seconds": 2}"#, "seconds"),
        ] {
            let err = pipeline(args, 1).err().expect(args).to_string();
            assert!(err.contains(want), "{args}: {err}");
        }
    }
}
