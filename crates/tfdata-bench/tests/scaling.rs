//! The `scaling` scenario end to end, on a tiny grid: the real binary, its
//! worker and reader processes, a real dispatcher. Checks what it reports
//! (every cell's line, every element received once, the model's lines), not
//! how fast anything is.

use std::process::Command;

use serde_json::Value;

fn run_tiny_grid() -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_tfdata-bench"))
        .args([
            "--json",
            "--scenario",
            "scaling",
            "--scaling-workers",
            "1,2",
            "--scaling-readers",
            "2",
            "--scaling-workloads",
            "small,large",
            "--scaling-small-elements",
            "3001",
            "--scaling-large-elements",
            "8",
            "--scaling-dispatcher-workers",
            "2,4",
            "--min-seconds",
            "0.5",
            "--capacity-warmup-seconds",
            "0.2",
        ])
        .output()
        .expect("the bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    String::from_utf8(output.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn lines<'a>(all: &'a [Value], scenario: &str) -> Vec<&'a Value> {
    all.iter().filter(|v| v["scenario"] == scenario).collect()
}

#[test]
fn a_tiny_grid_reports_every_cell_with_every_element_and_a_model() {
    let all = run_tiny_grid();

    for (scenario, total, unit) in [
        ("scaling/small", 3001u64, "elements/s"),
        ("scaling/large", 8, "MB/s"),
    ] {
        let cells = lines(&all, scenario);
        let grid: Vec<(u64, u64)> = cells
            .iter()
            .map(|c| {
                (
                    c["workers"].as_u64().unwrap(),
                    c["readers"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(grid, vec![(1, 2), (2, 2)], "{scenario}");
        for cell in cells {
            let workers = cell["workers"].as_u64().unwrap();
            // Each worker serves total / workers, rounded down (3001 = 2 × 1500 + 1).
            let per_worker = total / workers;
            assert_eq!(cell["elements_per_worker"], per_worker, "{cell}");
            assert_eq!(cell["items"], per_worker * workers, "{cell}");
            let per_reader: Vec<u64> = cell["items_per_reader"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(per_reader.len(), 2);
            assert_eq!(per_reader.iter().sum::<u64>(), per_worker * workers);
            assert_eq!(cell["unit"], unit);
            assert!(cell["value"].as_f64().unwrap() > 0.0, "{cell}");
            assert!(cell["whole_read_value"].as_f64().unwrap() > 0.0, "{cell}");
            // The workers ran the dataset, so their CPU was measured.
            assert!(cell["worker_cpu_us_per_item"].as_f64().is_some(), "{cell}");
            assert!(
                cell["dispatcher_cpu_us_per_item"].as_f64().is_some(),
                "{cell}"
            );
        }
    }
    assert_eq!(lines(&all, "scaling/large")[0]["payload_bytes"], 8u64 << 20);

    let steps = lines(&all, "scaling/dispatcher");
    assert!(!steps.is_empty());
    assert_eq!(steps[0]["workers"], 2);
    assert_eq!(steps[0]["readers"], 20);
    // Each reader's answer lists the 2 workers' tasks.
    assert!(steps[0]["client_heartbeat_answer_bytes"].as_f64().unwrap() > 0.0);

    let model = lines(&all, "scaling/model");
    let shape: Vec<(&str, u64)> = model
        .iter()
        .map(|m| {
            (
                m["workload"].as_str().unwrap(),
                m["workers"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("small", 100),
            ("small", 1000),
            ("large", 100),
            ("large", 1000)
        ]
    );
    for m in model {
        assert!(m["readers"].as_f64().unwrap() >= 1.0, "{m}");
        assert!(m["data_plane_mb_per_second"].as_f64().unwrap() > 0.0, "{m}");
        // The calibration measured something, so the dispatcher is modelled.
        assert!(m["dispatcher_cores"].as_f64().is_some(), "{m}");
        assert_eq!(m["inputs"]["cells"], 2);
    }
}

#[test]
fn a_grid_too_small_for_its_workers_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_tfdata-bench"))
        .args([
            "--scenario",
            "scaling",
            "--scaling-workers",
            "4",
            "--scaling-small-elements",
            "3",
        ])
        .output()
        .expect("the bench runs");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--scaling-small-elements"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
