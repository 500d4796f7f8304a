//! Lookup tables and SparseTensors in TensorFlow graphs through the
//! worker's processing paths: the pipeline as translated (parallel epochs)
//! and rewritten for static DATA sharding (the rewrite rebuilds the
//! pipeline from its wire form; its functions keep the table they
//! captured). Shard `i` of 2 must be TensorFlow's elements `i, i + 2, ...`.
//! The graphs are fixtures of `tests/fixtures` (as TensorFlow's client
//! registers them; `tensorflow_corpus.rs` checks their elements).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use tfdata_core::Element;
use tfdata_dataset::Dataset;
use tfdata_dataset::autoshard::{StaticPolicy, auto_shard};

fn elements(ds: &Dataset) -> Vec<Element> {
    ds.iter().unwrap().map(|e| e.unwrap()).collect()
}

fn check(name: &str) {
    let bytes = std::fs::read(format!(
        "{}/tests/fixtures/{name}.graph.pb",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let translated = tfdata_graph::translate_bytes(&bytes).unwrap();
    let all = elements(&translated.dataset);
    assert!(all.len() > 2, "{name}: {} elements", all.len());
    for index in 0..2 {
        let shard = translated
            .rewritten(|root| auto_shard(root, StaticPolicy::Data, 2, index))
            .unwrap();
        let want: Vec<&Element> = all.iter().skip(index as usize).step_by(2).collect();
        let got = elements(&shard);
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "{name} shard {index}");
    }
}

#[test]
fn tables_survive_the_static_sharding_rewrite() {
    check("lookup_static_hash_table");
    check("lookup_vocabulary_oov_buckets");
}

#[test]
fn sparse_elements_survive_the_static_sharding_rewrite() {
    check("sparse_elements_batched");
}
