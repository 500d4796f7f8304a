//! Helpers shared by the process-level tests.

#![allow(clippy::unwrap_used, dead_code)] // test code

pub mod process;

use std::time::{Duration, Instant};

/// Waits until the dispatcher at `address` knows `n` workers.
pub fn wait_for_workers(address: &str, n: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    rt.block_on(async {
        let client = tfdata::DispatcherClient::new(address).unwrap();
        loop {
            let request = tfdata_proto::data::GetWorkersRequest {};
            if let Ok(r) = client.get_workers(request).await
                && r.workers.len() >= n
            {
                return;
            }
            assert!(Instant::now() < deadline, "workers did not register");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}
