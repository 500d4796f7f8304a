//! The `dynamic-deterministic` scenario end to end, tiny: the real binary,
//! its worker processes (one of them stopped and continued), a real
//! dispatcher. Checks what it reports (every line, both reads of each, the
//! slow worker named), not how fast anything is. The exact-sequence checks
//! run inside the binary: a wrong element makes it exit with an error.

use std::process::Command;

use serde_json::Value;

#[test]
fn a_tiny_run_reports_both_reads_and_the_slow_worker() {
    let output = Command::new(env!("CARGO_BIN_EXE_tfdata-bench"))
        .args([
            "--json",
            "--scenario",
            "dynamic-deterministic",
            "--deterministic-elements",
            "5000",
            "--deterministic-slow-elements",
            "3000",
        ])
        .output()
        .expect("the bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let scenarios: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["scenario"].as_str().unwrap(),
                l["pipeline"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        scenarios,
        [
            ("dynamic-deterministic", "range"),
            ("dynamic-deterministic", "range-batch64"),
            ("dynamic-deterministic/slow-worker", "range"),
            ("dynamic-deterministic/slow-worker", "range"),
        ]
    );
    for line in &lines {
        assert!(line["value"].as_f64().unwrap() > 0.0, "{line}");
        assert!(line["non_deterministic"].as_f64().unwrap() > 0.0, "{line}");
        assert!(line["ratio_to_non_deterministic"].as_f64().unwrap() > 0.0);
        assert_eq!(line["tensorflow"], Value::Null, "{line}");
        assert!(line["tensorflow_note"].is_string());
    }
    assert_eq!(lines[0]["elements"], 5000);
    assert_eq!(lines[0]["readers"], 2);
    for (slow, readers) in lines[2..].iter().zip([1, 2]) {
        check_slow_line(slow, readers);
    }
}

fn check_slow_line(slow: &Value, readers: u64) {
    assert_eq!(slow["elements"], 3000);
    assert_eq!(slow["readers"], readers);
    for key in ["slow_worker", "non_deterministic_slow_worker"] {
        let worker = &slow[key];
        assert!(
            worker["address"]
                .as_str()
                .expect("an address")
                .contains(':'),
            "{slow}"
        );
        assert!(worker["pid"].as_u64().expect("a pid") > 0);
        assert_eq!(worker["stopped_ms"], 90);
        assert_eq!(worker["running_ms"], 10);
        let fraction = worker["stopped_fraction"].as_f64().expect("a fraction");
        assert!((0.0..=1.0).contains(&fraction), "{slow}");
    }
    assert!(slow["reader_reorder"].is_object(), "{slow}");
    assert!(slow["dispatcher_reorder"].is_object(), "{slow}");
}
