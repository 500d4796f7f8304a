//! The V1 queue and reader ops (`FIFOQueue`, `WholeFileReader`,
//! `ReaderRead`, ...): TensorFlow's V2 kernels on reference-typed handles.
//! A tf.function cannot trace them, but a dataset function built in a
//! `tf.compat.v1` graph holds them, and a worker receives such graphs. The
//! handles are the same values here, so each V1 op is its V2 kernel
//! ([`super::readers`]) under the older name.
//!
//! The other V1 readers (`TextLineReader`, `TFRecordReader`, ...) are not
//! here: TensorFlow 2.21 refuses graphs that use them.

use super::ResourceKernelDef;
use super::readers::KERNELS as V2;

/// The V2 kernel `op` (a compile-time error if there is none).
const fn v2(op: &str) -> &'static ResourceKernelDef {
    let mut i = 0;
    while i < V2.len() {
        if same(V2[i].op.as_bytes(), op.as_bytes()) {
            return &V2[i];
        }
        i += 1;
    }
    panic!("no such V2 reader kernel")
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The V2 kernel `v2_op` under the V1 name `op`.
const fn renamed(op: &'static str, v2_op: &str) -> ResourceKernelDef {
    let k = v2(v2_op);
    ResourceKernelDef {
        op,
        outputs: k.outputs,
        build: k.build,
    }
}

pub(super) const KERNELS: &[ResourceKernelDef] = &[
    renamed("FIFOQueue", "FIFOQueueV2"),
    renamed("QueueEnqueue", "QueueEnqueueV2"),
    renamed("QueueEnqueueMany", "QueueEnqueueManyV2"),
    renamed("QueueClose", "QueueCloseV2"),
    renamed("WholeFileReader", "WholeFileReaderV2"),
    renamed("ReaderRead", "ReaderReadV2"),
    renamed("ReaderReadUpTo", "ReaderReadUpToV2"),
    renamed("ReaderNumRecordsProduced", "ReaderNumRecordsProducedV2"),
    renamed(
        "ReaderNumWorkUnitsCompleted",
        "ReaderNumWorkUnitsCompletedV2",
    ),
    renamed("ReaderReset", "ReaderResetV2"),
    renamed("ReaderSerializeState", "ReaderSerializeStateV2"),
    renamed("ReaderRestoreState", "ReaderRestoreStateV2"),
];
