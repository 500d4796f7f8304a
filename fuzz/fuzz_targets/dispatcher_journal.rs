//! A fault-tolerant dispatcher's start on a journal directory of fuzzed
//! files: `Dispatcher::new` with `fault_tolerant_mode` reads the newest
//! compaction `snapshot_<n>` and the `journal_<n>`, `journal_<n+1>` after it (TFRecord
//! framing, `CompactedState` and `Update` messages), replays them and
//! compacts. A start that succeeds must be repeatable: a second start on
//! the directory it left recovers the same state.
//!
//! Input: a flags byte (bit 0: a compaction file; bit 1: a second journal
//! file; bits 2-7: the number n), then the compaction file and the first
//! journal file as u16-length-prefixed parts, then the second journal file.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use tfdata_fuzz::Input;
use tfdata_fuzz::dispatcher::{Dispatcher, DispatcherConfig, SystemClock, same_state};

fn start(config: &DispatcherConfig) -> tfdata_core::Result<Dispatcher> {
    Dispatcher::new(config.clone(), Arc::new(SystemClock))
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let n = u64::from(flags >> 2);
    let compaction = input.part();
    let first = input.part();
    let second = input.rest();

    let dir = tfdata_fuzz::temp_dir();
    let journal = dir.path().join("tf_data_dispatcher_journal");
    std::fs::create_dir_all(&journal).expect("journal dir");
    let write = |name: String, bytes: &[u8]| {
        std::fs::write(journal.join(name), bytes).expect("write a journal file")
    };
    // Without a compaction, replay starts at journal_0.
    let first_journal = if flags & 1 != 0 {
        write(format!("snapshot_{n}"), compaction);
        n
    } else {
        0
    };
    write(format!("journal_{first_journal}"), first);
    if flags & 2 != 0 {
        write(format!("journal_{}", first_journal + 1), second);
    }

    let config = DispatcherConfig {
        work_dir: Some(dir.path().display().to_string()),
        fault_tolerant_mode: true,
        ..Default::default()
    };
    let Ok(dispatcher) = start(&config) else {
        return;
    };
    let state = dispatcher.state_blocking();
    drop(dispatcher);
    let again = match start(&config) {
        Ok(again) => again,
        Err(e) => panic!("a journal a start accepted is not accepted again: {e}"),
    };
    assert!(
        same_state(&again.state_blocking(), &state),
        "a restart changed the state"
    );
});
