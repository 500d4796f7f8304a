//! TensorFlow dataset graphs as tfdata workers take them
//! (`tfdata_graph::translate_bytes`: decoding, compiling every function the
//! graph reaches, running the dataset nodes, validating the pipeline) and
//! as the dispatcher checks them (`tfdata_graph::unsupported_ops`). The
//! pipeline is not iterated: an arbitrary graph may read this machine's
//! files or run a kernel for as long as its input says. Graphs naming
//! files (`MatchingFiles`, URLs) are skipped, as in `tf_graph`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if !tfdata_fuzz::offline(data) {
        return;
    }
    if let Ok(graph) = tfdata_graph::decode_graph(data) {
        let _ = tfdata_graph::unsupported_ops(&graph);
    }
    if let Ok(t) = tfdata_graph::translate_bytes(data) {
        let _ = t.dataset.element_spec();
        let _ = t.dataset.cardinality();
    }
});
