//! The `autoscale-model` scenario end to end: the real binary driving the
//! dispatcher's `ScalingController` in simulation at 100 workers, with the
//! costs given as flags (no `autoscale` run needed). Checks what the
//! controller does with demand steps in the model: every step settles on
//! the needed count without overshoot or oscillation, a doubling within
//! two periods, and the report has a line per step.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::process::Command;

use serde_json::Value;

#[test]
fn the_controller_follows_demand_steps_at_100_workers() {
    let output = Command::new(env!("CARGO_BIN_EXE_tfdata-bench"))
        .args([
            "--json",
            "--scenario",
            "autoscale-model",
            "--model-workers",
            "100",
            "--model-worker-rate",
            "50",
            "--model-startup-seconds",
            "2",
            "--model-step-periods",
            "12",
            "--autoscale-steps",
            "1,2,4,1",
        ])
        .output()
        .expect("the bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let steps: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(steps.len(), 4, "{steps:?}");
    for (i, (step, needed)) in steps.iter().zip([25, 50, 100, 25]).enumerate() {
        assert_eq!(step["scenario"], "autoscale-model");
        assert_eq!(step["workers"], 100);
        assert_eq!(step["needed_workers"], needed, "{step}");
        assert_eq!(step["final_live_workers"], needed, "{step}");
        assert_eq!(step["changes_after_settled"], 0, "{step}");
        let periods = step["settled_periods"].as_f64().expect("settled");
        if i > 0 {
            // A step from a fed cluster is one jump to the estimate.
            assert!(
                periods <= 2.0,
                "step {i} settled after {periods} periods: {step}"
            );
        }
        if i < 3 {
            assert!(
                step["max_live_workers"].as_i64().unwrap() <= needed + 1,
                "{step}"
            );
        }
    }
}

#[test]
fn the_model_needs_costs_from_a_run_or_flags() {
    let output = Command::new(env!("CARGO_BIN_EXE_tfdata-bench"))
        .args([
            "--scenario",
            "autoscale-model",
            "--model-worker-rate=-1",
            "--model-startup-seconds",
            "2",
        ])
        .output()
        .expect("the bench runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("worker rate"), "{stderr}");
}
