//! `docs/compatibility.md` lists every op tfdata workers run in TensorFlow
//! graphs, and nothing else as supported.

#[test]
fn the_compatibility_doc_lists_every_supported_op() {
    if std::env::var_os("TFDATA_PRINT_OPS").is_some() {
        println!("OPS {}", tfdata_graph::supported_ops().join(" "));
    }
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/compatibility.md"
    ))
    .expect("docs/compatibility.md");
    let section = doc
        .split("<!-- supported ops: begin -->")
        .nth(1)
        .and_then(|s| s.split("<!-- supported ops: end -->").next())
        .expect("the supported-ops section markers");
    let listed: std::collections::BTreeSet<&str> = section
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let supported = tfdata_graph::supported_ops();
    let missing: Vec<_> = supported
        .iter()
        .filter(|op| !listed.contains(*op))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/compatibility.md does not list {missing:?}"
    );
}
