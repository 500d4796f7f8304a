//! Writes the seed corpus under `fuzz/corpus/<target>/` from real
//! encodings: elements compressed by `tfdata_core`, batches from
//! `BatchEncoder`, TFRecord files from `TfRecordWriter`, Examples from
//! `ExampleBuilder`, pipelines from docs/pipelines.md and the builders, and
//! a fault-tolerant dispatcher's own requests, journal and compaction.
//!
//! `cargo run --example gen_corpus` in `fuzz/` (a plain build, no fuzzing
//! instrumentation). The seeds are committed; rerun after a format change.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use bytes::Bytes;
use prost::Message;
use tfdata_core::batch::{BatchEncoder, ChunkCompression, Compressor};
use tfdata_core::{Element, Tensor, element, tfrecord};
use tfdata_dataset::Dataset;
use tfdata_dataset::example::ExampleBuilder;
use tfdata_dataset::io::{CompressionType, TfRecordWriter};
use tfdata_dataset::pipeline::to_pipeline_def;
use tfdata_fuzz::dispatcher::{Dispatcher, DispatcherConfig, DispatcherGrpc, SystemClock};
use tfdata_fuzz::{grpc_frame, put_part};
use tfdata_proto::data::{self as wire, dispatcher_service_server::DispatcherService};
use tfdata_proto::tensorflow::{AttrValue, GraphDef, NodeDef, attr_value};
use tfdata_proto::tfdata::stream::StreamRequest;
use tonic::Request;

struct Corpus {
    root: PathBuf,
}

impl Corpus {
    fn put(&self, target: &str, name: &str, bytes: &[u8]) {
        let dir = self.root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus dir");
        std::fs::write(dir.join(name), bytes).expect("a seed");
    }
}

fn with_head(head: &[u8], body: &[u8]) -> Vec<u8> {
    [head, body].concat()
}

fn elements() -> Vec<Element> {
    vec![
        Element::single(Tensor::scalar(42i64)),
        Element::new(vec![
            Tensor::from_slice(&[1.5f32, -2.0, 3.25, 0.0], vec![2, 2]).expect("f32"),
            Tensor::strings(
                vec![Bytes::from("ab"), Bytes::new(), Bytes::from("xyz")],
                vec![3],
            )
            .expect("strings"),
            Tensor::from_slice::<i32>(&[], vec![0, 4]).expect("empty"),
            Tensor::from_slice(&[true, false], vec![2]).expect("bool"),
        ]),
        Element::single(Tensor::from_slice(&[0u8; 300], vec![10, 30]).expect("u8")),
    ]
}

fn batch(mode: ChunkCompression) -> Vec<u8> {
    let mut encoder = BatchEncoder::new();
    for e in elements().iter().chain(elements().iter()) {
        encoder.push(e);
    }
    let mut batch = encoder.finish(&mut Compressor::new(mode)).expect("batch");
    batch.first_element_index = 3;
    batch.encode_to_vec()
}

fn tfrecords(compression: CompressionType, records: &[&[u8]]) -> Vec<u8> {
    let mut w = TfRecordWriter::new("seed", Vec::new(), compression);
    for r in records {
        w.write(r).expect("record");
    }
    w.finish().expect("finish")
}

/// A compressed stream holding `text` (written by `TfRecordWriter`, so
/// the lines carry a record's framing bytes too: text lines are any bytes).
fn compressed_text(compression: CompressionType, text: &[u8]) -> Vec<u8> {
    tfrecords(compression, &[text])
}

fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|i| i.to_string()).collect(),
        ..Default::default()
    }
}

fn constant(name: &str, tensor: Tensor) -> NodeDef {
    let mut n = node(name, "Const", &[]);
    n.attr.insert(
        "value".into(),
        AttrValue {
            value: Some(attr_value::Value::Tensor(element::tensor_to_proto(&tensor))),
        },
    );
    n
}

fn range_graph() -> Vec<u8> {
    GraphDef {
        node: vec![
            constant("start", Tensor::scalar(0i64)),
            constant("stop", Tensor::scalar(10i64)),
            constant("step", Tensor::scalar(1i64)),
            node("range", "RangeDataset", &["start", "stop", "step"]),
            node("zip", "ZipDataset", &["range", "slices"]),
            constant(
                "values",
                Tensor::from_slice(&[1i64, 2, 3], vec![3]).expect("values"),
            ),
            node("slices", "TensorSliceDataset", &["values"]),
            node("out", "_Retval", &["zip"]),
        ],
        ..Default::default()
    }
    .encode_to_vec()
}

fn pipeline(ds: &Dataset) -> wire::DatasetDef {
    wire::DatasetDef {
        graph: Bytes::new(),
        tfdata_pipeline: Some(to_pipeline_def(ds, true).expect("pipeline")),
    }
}

/// Method numbers of the dispatcher_rpc target.
mod method {
    pub const WORKER_HEARTBEAT: u8 = 0;
    pub const WORKER_UPDATE: u8 = 1;
    pub const GET_DATASET_DEF: u8 = 2;
    pub const GET_SPLIT: u8 = 3;
    pub const GET_OR_REGISTER_DATASET: u8 = 5;
    pub const GET_OR_CREATE_JOB: u8 = 6;
    pub const GET_OR_CREATE_ITERATION: u8 = 7;
    pub const MAYBE_REMOVE_TASK: u8 = 8;
    pub const RELEASE_ITERATION_CLIENT: u8 = 9;
    pub const CLIENT_HEARTBEAT: u8 = 10;
    pub const GET_DATA_SERVICE_METADATA: u8 = 12;
}

/// Drives a fault-tolerant dispatcher through a dataset's life, recording
/// each request as the dispatcher_rpc target encodes it; returns the
/// recording, and the journal directory the run left.
fn dispatcher_session(dir: &Path, dataset: wire::DatasetDef, policy: i32) -> Vec<u8> {
    let config = DispatcherConfig {
        work_dir: Some(dir.display().to_string()),
        fault_tolerant_mode: true,
        ..Default::default()
    };
    let d = Arc::new(Dispatcher::new(config, Arc::new(SystemClock)).expect("dispatcher"));
    let grpc = DispatcherGrpc(d.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut rec = vec![1u8]; // fault-tolerant mode
    let mut note = |method: u8, m: &dyn Fn() -> Vec<u8>| {
        rec.push(method);
        rec.push(1);
        put_part(&mut rec, &m());
    };
    rt.block_on(async {
        let heartbeat = wire::WorkerHeartbeatRequest {
            worker_address: "127.0.0.1:1".into(),
            transfer_servers: vec![wire::DataTransferServerInfo {
                protocol: "grpc".into(),
                address: "127.0.0.1:1".into(),
                ..Default::default()
            }],
            worker_uid: 7,
            tfdata_runs_pipelines: true,
            ..Default::default()
        };
        note(method::WORKER_HEARTBEAT, &|| heartbeat.encode_to_vec());
        let _ = grpc.worker_heartbeat(Request::new(heartbeat.clone())).await;

        let register = wire::GetOrRegisterDatasetRequest {
            dataset: Some(dataset.clone()),
            metadata: Some(wire::DataServiceMetadata {
                compression: 1,
                cardinality: 10,
                ..Default::default()
            }),
            dataset_id: None,
        };
        note(method::GET_OR_REGISTER_DATASET, &|| {
            register.encode_to_vec()
        });
        let id = grpc
            .get_or_register_dataset(Request::new(register.clone()))
            .await
            .expect("register")
            .into_inner()
            .dataset_id;
        let by_id = wire::GetDataServiceMetadataRequest {
            dataset_id: id.clone(),
        };
        note(method::GET_DATA_SERVICE_METADATA, &|| by_id.encode_to_vec());
        let _ = grpc.get_data_service_metadata(Request::new(by_id)).await;
        let def = wire::GetDatasetDefRequest {
            dataset_id: id.clone(),
        };
        note(method::GET_DATASET_DEF, &|| def.encode_to_vec());
        let _ = grpc.get_dataset_def(Request::new(def)).await;

        let job = wire::GetOrCreateJobRequest {
            dataset_id: id,
            processing_mode_def: Some(wire::ProcessingModeDef {
                sharding_policy: policy,
                ..Default::default()
            }),
            job_name: Some("job".into()),
            ..Default::default()
        };
        note(method::GET_OR_CREATE_JOB, &|| job.encode_to_vec());
        let job_id = grpc
            .get_or_create_job(Request::new(job.clone()))
            .await
            .expect("job")
            .into_inner()
            .job_id;
        let iteration = wire::GetOrCreateIterationRequest {
            job_id,
            repetition: 0,
            ..Default::default()
        };
        note(method::GET_OR_CREATE_ITERATION, &|| {
            iteration.encode_to_vec()
        });
        let client = grpc
            .get_or_create_iteration(Request::new(iteration))
            .await
            .expect("iteration")
            .into_inner()
            .iteration_client_id;
        let beat = wire::ClientHeartbeatRequest {
            iteration_client_id: client,
            ..Default::default()
        };
        note(method::CLIENT_HEARTBEAT, &|| beat.encode_to_vec());
        let _ = grpc.client_heartbeat(Request::new(beat)).await;

        let state = d.state_copy().await;
        let iteration_id = state.iterations().next().map_or(0, |i| i.id.0);
        let task_id = state.tasks().next().map_or(0, |t| t.id.0);
        for sequence in 0..2 {
            let split = wire::GetSplitRequest {
                iteration_id,
                repetition: 0,
                split_provider_index: 0,
                tfdata_worker_address: "127.0.0.1:1".into(),
                tfdata_split_sequence: Some(sequence),
                tfdata_task_id: task_id,
                ..Default::default()
            };
            note(method::GET_SPLIT, &|| split.encode_to_vec());
            let _ = grpc.get_split(Request::new(split)).await;
        }
        let remove = wire::MaybeRemoveTaskRequest {
            task_id,
            consumer_index: 0,
            round: 0,
        };
        note(method::MAYBE_REMOVE_TASK, &|| remove.encode_to_vec());
        let update = wire::WorkerUpdateRequest {
            worker_address: "127.0.0.1:1".into(),
            updates: vec![wire::TaskProgress {
                task_id,
                completed: true,
            }],
        };
        note(method::WORKER_UPDATE, &|| update.encode_to_vec());
        let _ = grpc.worker_update(Request::new(update)).await;
        let release = wire::ReleaseIterationClientRequest {
            iteration_client_id: client,
        };
        note(method::RELEASE_ITERATION_CLIENT, &|| {
            release.encode_to_vec()
        });
        let _ = grpc.release_iteration_client(Request::new(release)).await;
    });
    drop(rt);
    rec
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let c = Corpus { root };

    // compressed_element: kind byte 0 / 1 / 2.
    for (i, e) in elements().iter().enumerate() {
        let compressed = element::compress(e).expect("compress");
        c.put(
            "compressed_element",
            &format!("compressed_{i}"),
            &with_head(&[0], &compressed.encode_to_vec()),
        );
        c.put(
            "compressed_element",
            &format!("uncompressed_{i}"),
            &with_head(&[1], &element::to_uncompressed(e).encode_to_vec()),
        );
        let response = wire::GetElementResponse {
            element: Some(wire::get_element_response::Element::Compressed(compressed)),
            element_index: 5,
            ..Default::default()
        };
        c.put(
            "compressed_element",
            &format!("response_{i}"),
            &with_head(&[2], &response.encode_to_vec()),
        );
    }

    // element_batch and element_stream.
    let never = batch(ChunkCompression::Never);
    let always = batch(ChunkCompression::Always);
    c.put("element_batch", "never", &never);
    c.put("element_batch", "always", &always);
    let two = [grpc_frame(&never), grpc_frame(&always)].concat();
    c.put("element_stream", "two_batches", &with_head(&[16, 2], &two));
    c.put(
        "element_stream",
        "one_byte_frames",
        &with_head(&[0, 0], &grpc_frame(&never)),
    );
    let open = StreamRequest {
        task_id: 3,
        credit_elements: 100,
        credit_bytes: 1 << 20,
        ..Default::default()
    };
    c.put(
        "element_stream",
        "requests",
        &with_head(&[7, 1], &grpc_frame(&open.encode_to_vec())),
    );

    // webdataset_samples: mode byte, pattern part, fields part, shard; the
    // shards are the dataset crate's webdataset fixtures (the first one cut
    // after its second sample and the end-of-archive blocks).
    let shard = include_bytes!("../../crates/tfdata-dataset/testdata/webdataset/shard-000000.tar");
    let mixed = include_bytes!("../../crates/tfdata-dataset/testdata/webdataset/mixed.tar.gz");
    let odd = include_bytes!("../../crates/tfdata-dataset/testdata/webdataset/odd.tar.gz");
    for (name, mode, pattern, fields, body) in [
        (
            "plain",
            0u8,
            "shard-{000000..000001}.tar",
            "",
            &shard[..7168],
        ),
        (
            "gzip_fields",
            1 | 4,
            "{a,b}/x-{0..3}.tar::c.tar",
            "jpg,cls,seg.png",
            &mixed[..],
        ),
        ("odd_small_limits", 2, "d{-05..5..2}{Y..b}", "", &odd[..]),
    ] {
        let mut seed = vec![mode];
        put_part(&mut seed, pattern.as_bytes());
        put_part(&mut seed, fields.as_bytes());
        seed.extend_from_slice(body);
        c.put("webdataset_samples", name, &seed);
    }

    // tfrecord: mode byte, buffer size byte, file.
    let records: [&[u8]; 3] = [b"first", b"", b"third record"];
    for (mode, compression, name) in [
        (0u8, CompressionType::None, "plain"),
        (1, CompressionType::Gzip, "gzip"),
        (2, CompressionType::Zlib, "zlib"),
    ] {
        let file = tfrecords(compression, &records);
        c.put("tfrecord", name, &with_head(&[mode, 0], &file));
        c.put(
            "tfrecord",
            &format!("{name}_buffer_7"),
            &with_head(&[mode, 7], &file),
        );
    }
    c.put(
        "tfrecord",
        "text",
        &with_head(&[4, 3], b"one\ntwo\r\nthree"),
    );
    c.put(
        "tfrecord",
        "text_gzip",
        &with_head(&[5, 0], &compressed_text(CompressionType::Gzip, b"a\nb\n")),
    );

    // example: two fixed specs ("a": int64 [2], "label": float scalar) and a
    // var-len string "b"; single, then batched.
    let example = ExampleBuilder::new()
        .int64("a", &[1, 2])
        .bytes("b", &[b"x".as_slice(), b"yz"])
        .float("label", &[0.5])
        .build();
    let specs: &[u8] = &[
        2, // three specs, single
        0, 0, 1, 0, 2, // "a": fixed int64, rank 1, no default, [2]
        1, 5, 0, 0, // "b": var-len string
        2, 2, 0, 1, // "label": fixed float scalar with a default
    ];
    c.put("example", "single", &with_head(specs, &example));
    let mut batched = specs.to_vec();
    batched[0] |= 4;
    put_part(&mut batched, &example);
    put_part(
        &mut batched,
        &ExampleBuilder::new().int64("a", &[3, 4]).build(),
    );
    c.put("example", "batch", &batched);

    // json_pipeline: docs/pipelines.md's example and small pure pipelines.
    let docs = include_str!("../../docs/pipelines.md");
    let start = docs.find("```json\n").expect("a JSON example") + 8;
    let end = start + docs[start..].find("```").expect("its end");
    c.put("json_pipeline", "docs_images", &docs.as_bytes()[start..end]);
    c.put(
        "json_pipeline",
        "batch_range",
        br#"{"op": "batch", "batch_size": 2, "input": {"op": "range", "stop": 10}}"#,
    );
    c.put(
        "json_pipeline",
        "pipeline_form",
        br#"{"pipeline": {"op": "zip", "inputs": [{"op": "range", "stop": 3}, {"op": "from_tensor_slices", "tensors": [{"dtype": "int64", "shape": [3], "values": [1, 2, 3]}]}]}, "compress": false, "format_version": 2}"#,
    );
    let json = tfdata_dataset::json::to_json(
        &Dataset::range(8)
            .shuffle(4, Some(1), false)
            .repeat(Some(2))
            .skip(1)
            .take(5)
            .enumerate(0),
        true,
    )
    .expect("json");
    c.put("json_pipeline", "chain", json.as_bytes());

    // pipeline_def: mode byte, index byte, message.
    let ds = Dataset::range(10)
        .shard(2, 0)
        .batch(2, false)
        .prefetch(-1)
        .concatenate(Dataset::from_tensors(vec![
            Tensor::from_slice(&[1i64, 2], vec![2]).expect("t"),
        ]));
    let def = pipeline(&ds);
    let wire_def = def.tfdata_pipeline.clone().expect("pipeline");
    c.put(
        "pipeline_def",
        "pipeline",
        &with_head(&[0, 0], &wire_def.encode_to_vec()),
    );
    // DatasetDef, data sharding over 2 workers, index 0.
    c.put(
        "pipeline_def",
        "dataset_def_sharded",
        &with_head(&[1 | (2 << 2) | (2 << 5), 1], &def.encode_to_vec()),
    );
    let files = pipeline(&Dataset::tfrecord(
        &["/nonexistent/a", "/nonexistent/b"],
        "GZIP",
    ));
    c.put(
        "pipeline_def",
        "files_sharded",
        &with_head(&[1 | (1 << 2) | (2 << 5), 2], &files.encode_to_vec()),
    );
    let spec = ds.element_spec().expect("spec").expect("known spec");
    let value = tfdata_dataset::spec_coder::to_structured_value(&spec);
    c.put(
        "pipeline_def",
        "structured_value",
        &with_head(&[2, 0], &value.encode_to_vec()),
    );

    // tf_graph.
    c.put("tf_graph", "range_zip_slices", &range_graph());

    // Dispatcher: a real session, its journal and compaction.
    let work = tempfile::tempdir().expect("tempdir");
    let splittable = pipeline(&Dataset::range(10).batch(2, false));
    let rpc = dispatcher_session(work.path(), splittable, 1);
    c.put("dispatcher_rpc", "dynamic_session", &rpc);
    let mut off = rpc.clone();
    off[0] = 0;
    c.put("dispatcher_rpc", "session_in_memory", &off);
    let graph = wire::DatasetDef {
        graph: range_graph().into(),
        tfdata_pipeline: None,
    };
    let work2 = tempfile::tempdir().expect("tempdir");
    c.put(
        "dispatcher_rpc",
        "tf_graph_session",
        &dispatcher_session(work2.path(), graph, 1),
    );

    // The journal that session wrote (its first and only run: journal_0).
    let journal_dir = work.path().join("tf_data_dispatcher_journal");
    let journal_0 = std::fs::read(journal_dir.join("journal_0")).expect("journal_0");
    let (records, _) = tfrecord::read_records("journal_0", &journal_0).expect("records");
    let mut updates = Vec::new();
    for r in &records {
        let u = wire::Update::decode(r.clone()).expect("an update");
        u.encode_length_delimited(&mut updates).expect("encode");
    }
    c.put("dispatcher_updates", "session", &updates);

    let mut journal = vec![0u8];
    put_part(&mut journal, b"");
    journal.extend_from_slice(&journal_0);
    c.put("dispatcher_journal", "journal_0", &journal);

    // A compaction: the state after the session, through a restart.
    let restarted = Dispatcher::new(
        DispatcherConfig {
            work_dir: Some(work.path().display().to_string()),
            fault_tolerant_mode: true,
            ..Default::default()
        },
        Arc::new(SystemClock),
    )
    .expect("restart");
    let compacted = restarted.state_blocking().to_compacted();
    drop(restarted);
    c.put(
        "dispatcher_compaction",
        "session",
        &compacted.encode_to_vec(),
    );
    let mut compaction_file = Vec::new();
    tfrecord::write_record(&mut compaction_file, &compacted.encode_to_vec()).expect("record");
    // snapshot_1 (a compaction) and journal_1 (flags: compaction, n = 1),
    // with a torn tail.
    let mut journal = vec![1 | (1 << 2)];
    put_part(&mut journal, &compaction_file);
    put_part(&mut journal, &journal_0[..journal_0.len() - 3]);
    c.put(
        "dispatcher_journal",
        "compaction_and_torn_journal",
        &journal,
    );

    // worker_rpc: ProcessTask inline and from a dataset file, GetElement,
    // GetWorkerTasks, and a stream opening.
    let task = |dataset: wire::task_def::Dataset| wire::ProcessTaskRequest {
        task: Some(wire::TaskDef {
            dataset_id: "1000".into(),
            task_id: 3,
            iteration_id: 2,
            worker_address: "127.0.0.1:4".into(),
            dataset: Some(dataset),
            processing_mode_def: Some(wire::ProcessingModeDef { sharding_policy: 3, ..Default::default() }),
            num_workers: 2,
            worker_index: 1,
            ..Default::default()
        }),
    };
    let mut w = Vec::new();
    w.push(0);
    put_part(
        &mut w,
        &task(wire::task_def::Dataset::DatasetDef(def.clone())).encode_to_vec(),
    );
    put_part(&mut w, b"");
    w.push(0);
    let mut file = Vec::new();
    tfrecord::write_record(&mut file, &def.encode_to_vec()).expect("record");
    put_part(
        &mut w,
        &task(wire::task_def::Dataset::Path("datasets/1000".into())).encode_to_vec(),
    );
    put_part(&mut w, &file);
    w.push(1);
    put_part(
        &mut w,
        &wire::GetElementRequest {
            task_id: 3,
            consumer_index: Some(0),
            round_index: Some(1),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    w.push(2);
    put_part(&mut w, b"");
    w.extend_from_slice(&[4, 9, 0]);
    put_part(&mut w, &grpc_frame(&open.encode_to_vec()));
    c.put("worker_rpc", "session", &w);

    // array_record: Google's writer's files (the dataset crate's fixtures,
    // made by its make_fixtures.py), in the target's two-block form.
    for name in ["group_size_10", "default", "brotli", "snappy", "empty"] {
        c.put("array_record", name, &array_record_seed(name));
    }

    println!("seeds written under {}", c.root.display());
}

/// A two-block ArrayRecord fixture as the `array_record` target takes it:
/// mode 0, its first block up to its last non-zero byte (signature, data
/// chunks, footer, padding chunk header) as a part, then its last block
/// likewise (the postscript).
fn array_record_seed(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/tfdata-dataset/testdata/array_record")
        .join(format!("{name}.array_record"));
    let file = std::fs::read(&path).expect("an ArrayRecord fixture");
    assert_eq!(file.len(), 2 << 16, "{name}: two blocks");
    let used = |block: &[u8]| block[..=block.iter().rposition(|&b| b != 0).unwrap_or(0)].to_vec();
    let (first, last) = file.split_at(1 << 16);
    let mut seed = vec![0u8];
    put_part(&mut seed, &used(first));
    seed.extend(used(last));
    seed
}
