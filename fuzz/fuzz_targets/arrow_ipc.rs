//! Arrow IPC files and streams as `arrow_dataset` reads them, from memory
//! (`tfdata_dataset::columnar::arrow_ipc::read_in_memory`): the format told
//! by its magic, the file format's footer or a stream's message scan, the
//! checks made before arrow-ipc sees a message (schema flatbuffers, buffer
//! bounds, validity bitmaps, buffer counts, compressed lengths), the
//! decoding of dictionaries and record batches with a projection, and the
//! conversion of the rows to elements (`BatchPlan`). Every element made
//! must match the structure planned from the schema.
//!
//! Input: a mode byte (bits 0-5: the schema's columns 0-5 to read, none
//! set: all of them; bits 6-7: rows, or batches of 1, 3 or 64 rows), then
//! the file.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tfdata_dataset::columnar::arrow_ipc::index::{IpcBytes, IpcIndex};
use tfdata_dataset::columnar::arrow_ipc::read_in_memory;
use tfdata_fuzz::Input;

/// Elements converted at most per input (a batch header may claim many
/// rows of zero-width columns).
const MAX_ELEMENTS: usize = 256;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let file = Bytes::copy_from_slice(input.rest());
    // The schema's column names, to pick some by the mode's bits.
    let columns: Option<Vec<String>> = IpcIndex::read(&IpcBytes::in_memory("fuzz", file.clone()))
        .ok()
        .and_then(|index| {
            let picked: Vec<String> = index
                .schema
                .fields()
                .iter()
                .take(6)
                .enumerate()
                .filter(|(i, _)| mode & (1 << i) != 0)
                .map(|(_, f)| f.name().clone())
                .collect();
            (!picked.is_empty()).then_some(picked)
        });
    let batch_rows = match mode >> 6 {
        0 => None,
        1 => Some(1),
        2 => Some(3),
        _ => Some(64),
    };
    if let Ok((structure, elements)) =
        read_in_memory(file, columns.as_deref(), batch_rows, MAX_ELEMENTS)
    {
        assert!(elements.len() <= MAX_ELEMENTS);
        for e in &elements {
            structure
                .check(e)
                .expect("an element matches the structure planned from the schema");
        }
    }
});
