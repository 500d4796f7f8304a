//! Generates the wire types from `proto/` with a vendored `protoc`, so a fresh
//! machine needs nothing installed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not baked in when it is compiled: worktrees
    // sharing one target dir share the compiled script too, and a baked-in
    // path would point at whichever checkout compiled it first.
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let files = [
        "tensorflow/tensor.proto",
        "tensorflow/struct.proto",
        "tensorflow/graph.proto",
        "tensorflow/example.proto",
        "tfdata/pipeline.proto",
        "tfdata/status.proto",
        "tfdata/compaction.proto",
        "tfdata/stream.proto",
        "tfdata/checkpoint.proto",
        "tensorflow/data/common.proto",
        "tensorflow/data/dispatcher.proto",
        "tensorflow/data/worker.proto",
        "tensorflow/data/journal.proto",
        "tensorflow/data/experimental/service_config.proto",
    ];
    let paths: Vec<_> = files.iter().map(|f| root.join(f)).collect();
    for p in &paths {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure()
        // Payloads are zero-copy `Bytes` from the socket to the reader.
        .bytes(".")
        // Sorted map entries, so our encoding is deterministic (a pipeline
        // encodes to the same bytes every time: reader checkpoints
        // fingerprint it).
        .btree_map(".tensorflow.DictValue.fields")
        .btree_map(".tfdata.pipeline")
        // Unimplemented methods answer UNIMPLEMENTED; lets tests fake a peer.
        .generate_default_stubs(true)
        .compile_with_config(config, &paths, &[root])?;
    Ok(())
}
