//! The look at a dataset and its caches autocache takes at job creation,
//! for either kind of definition: a tfdata pipeline
//! (`tfdata_dataset::autocache`) or a TensorFlow graph
//! (`tfdata_graph::autocache`). Both give candidate points with prefix
//! definitions and fingerprints; from there on (stale caches dropped, a
//! complete cache found, the definition rewritten to read it) the two are
//! one path. Blocking: it reads the definition, stats the files the
//! prefixes name, lists and deletes caches.

use tfdata_core::{DatasetId, Result};
use tfdata_dataset::autocache::{self, Fingerprint};
use tfdata_dataset::io::registry;
use tfdata_proto::data as wire;

use super::book::{Plan, PlannedPoint, PointCandidate};
use crate::persistence::store::DatasetStore;

/// What a look at a dataset's definition and its caches found.
pub(super) enum Survey {
    /// Nothing can be cached, and why.
    Refused(String),
    Planned {
        plan: Plan,
        /// Caches dropped because their files changed.
        dropped: Vec<String>,
        /// The deepest candidate with a complete cache, and the definition
        /// rewritten to read it.
        complete: Option<Box<(PlannedPoint, wire::DatasetDef)>>,
    },
}

/// The definition reading the cache of a candidate (by its position in the
/// analysis) at a path.
type Rewrite = Box<dyn Fn(usize, &str) -> Result<wire::DatasetDef>>;

/// A dataset's analysis, whichever its kind.
struct Analysed {
    candidates: Vec<PointCandidate>,
    fingerprints: Vec<Result<Fingerprint>>,
    stopped: Option<String>,
    /// The definition reading candidate `position`'s complete cache at a
    /// path.
    rewrite: Rewrite,
}

/// Surveys dataset `id` with caches under `root` (see the module docs).
pub(super) fn survey(store: &DatasetStore, id: &DatasetId, root: &str) -> Result<Survey> {
    let def = store.get(id)?;
    let analysed = match def.tfdata_pipeline {
        Some(pipeline) => analyse_pipeline(pipeline),
        None => match analyse_graph(&def.graph) {
            Ok(analysed) => analysed,
            Err(e) => {
                return Ok(Survey::Refused(format!(
                    "autocache could not read the TensorFlow graph: {e}"
                )));
            }
        },
    };
    let Analysed {
        candidates,
        fingerprints,
        stopped,
        rewrite,
    } = analysed;
    if candidates.is_empty() {
        return Ok(Survey::Refused(stopped.unwrap_or_else(|| {
            "the pipeline has no point whose output a cache would keep".into()
        })));
    }
    let fs: autocache::Resolver<'_> = &registry::file_system;
    let (mut points, mut positions, mut failures, mut dropped) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (position, (candidate, fingerprint)) in candidates.into_iter().zip(fingerprints).enumerate()
    {
        let fingerprint = match fingerprint {
            Ok(fp) => fp,
            Err(e) => {
                failures.push(format!("{}: {e}", candidate.label));
                continue;
            }
        };
        for stale in autocache::stale_caches(root, &fingerprint, fs)? {
            autocache::drop_cache(&stale, fs)?;
            dropped.push(stale);
        }
        points.push(PlannedPoint {
            cache_path: autocache::cache_path(root, &fingerprint),
            candidate,
        });
        positions.push(position);
    }
    if points.is_empty() {
        return Ok(Survey::Refused(format!(
            "no candidate point could be fingerprinted: {}",
            failures.join("; ")
        )));
    }
    let mut complete = None;
    for (point, position) in points.iter().zip(&positions).rev() {
        if autocache::is_complete(&point.cache_path, fs)? {
            let rewritten = rewrite(*position, &point.cache_path)?;
            complete = Some(Box::new((point.clone(), rewritten)));
            break;
        }
    }
    Ok(Survey::Planned {
        plan: Plan { points, stopped },
        dropped,
        complete,
    })
}

fn analyse_pipeline(pipeline: tfdata_proto::tfdata::pipeline::PipelineDef) -> Analysed {
    let analysis = autocache::analyse(&pipeline);
    // Each file the prefixes name is looked up once, however many
    // candidates name it.
    let fingerprints = autocache::fingerprints(&analysis, &registry::file_system);
    let candidates = analysis
        .candidates
        .iter()
        .map(|c| PointCandidate {
            index: c.index,
            label: c.label.clone(),
            in_memory: c.in_memory,
            prefix: wire::DatasetDef {
                graph: Default::default(),
                tfdata_pipeline: Some(tfdata_proto::tfdata::pipeline::PipelineDef {
                    root: Some(c.prefix.clone()),
                    ..pipeline.clone()
                }),
            },
        })
        .collect();
    let stopped = analysis.stopped.clone();
    Analysed {
        candidates,
        fingerprints,
        stopped,
        rewrite: Box::new(move |position, path| {
            Ok(wire::DatasetDef {
                graph: Default::default(),
                tfdata_pipeline: Some(autocache::rewrite(
                    &pipeline,
                    &analysis.candidates[position],
                    path,
                )?),
            })
        }),
    }
}

fn analyse_graph(bytes: &[u8]) -> Result<Analysed> {
    let graph = tfdata_graph::decode_graph(bytes)?;
    let analysis = tfdata_graph::autocache::analyse(&graph)?;
    let fingerprints = tfdata_graph::autocache::fingerprints(&analysis, &registry::file_system);
    let candidates = analysis
        .candidates
        .iter()
        .map(|c| PointCandidate {
            index: c.index,
            label: c.label.clone(),
            in_memory: c.in_memory,
            prefix: wire::DatasetDef {
                graph: prost::Message::encode_to_vec(&c.prefix).into(),
                tfdata_pipeline: None,
            },
        })
        .collect();
    let stopped = analysis.stopped.clone();
    Ok(Analysed {
        candidates,
        fingerprints,
        stopped,
        rewrite: Box::new(move |position, path| {
            let rewritten =
                tfdata_graph::autocache::rewrite(&graph, &analysis.candidates[position], path)?;
            Ok(wire::DatasetDef {
                graph: prost::Message::encode_to_vec(&rewritten).into(),
                tfdata_pipeline: None,
            })
        }),
    })
}
