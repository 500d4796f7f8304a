//! How an element-wise built-in applies: the component it transforms
//! (chosen by `component`, a dictionary key or tuple position), its spec
//! mapped and the rest of the element left as it is, the kernel's errors
//! named after the function; and the per-element seeds random ones draw.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tfdata_core::{Element, Error, Result, Tensor};

use crate::attrs::Attrs;
use crate::functions::ResolvedMap;
use crate::spec::{Structure, TensorSpec};

/// Per-element seeds for random ops: `seed` mixed with an element counter.
pub(super) struct Seeds {
    base: u64,
    counter: AtomicU64,
}

impl Seeds {
    pub(super) fn new(name: &str, args: &Attrs) -> Result<Arc<Seeds>> {
        let base = match args.opt_int(name, "seed")? {
            Some(s) => s as u64,
            None => crate::random::unseeded_seed(),
        };
        Ok(Arc::new(Seeds {
            base,
            counter: AtomicU64::new(0),
        }))
    }

    pub(super) fn next(&self) -> u64 {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        // SplitMix64 of base + n: decorrelated seeds for consecutive elements.
        let mut z = self
            .base
            .wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A map function applying `kernel` to one component.
pub(super) fn elementwise<K, S>(
    name: &str,
    args: &Attrs,
    known: &[&str],
    input: Option<&Structure>,
    kernel: K,
    spec: S,
) -> Result<ResolvedMap>
where
    K: Fn(&Tensor) -> Result<Tensor> + Send + Sync + 'static,
    S: Fn(&TensorSpec) -> Result<TensorSpec>,
{
    let mut allowed = known.to_vec();
    allowed.push("component");
    args.check_known(name, &allowed)?;
    let selector = args.str_or(name, "component", "")?.to_string();
    let (index, output) = match input {
        Some(structure) => {
            let index = structure.component_index(&selector)?;
            let mut i = 0;
            let output = structure.map_components(&mut |t| {
                let out = if i == index { spec(t)? } else { t.clone() };
                i += 1;
                Ok(out)
            })?;
            (Some(index), Some(output))
        }
        None => (None, None),
    };
    let name = name.to_string();
    let f = move |mut e: Element| -> Result<Element> {
        let index = match index {
            Some(i) => i,
            None if selector.is_empty() || selector == "0" => 0,
            None => selector.parse().map_err(|_| {
                Error::InvalidArgument(format!(
                    "{name}: component {selector:?} cannot be found: the element structure is unknown"
                ))
            })?,
        };
        let t = e.components.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!("{name}: the element has no component {index}"))
        })?;
        let out = kernel(t).map_err(|err| match err {
            Error::InvalidArgument(m) if !m.starts_with(name.as_str()) => {
                Error::InvalidArgument(format!("{name}: {m}"))
            }
            other => other,
        })?;
        e.components[index] = out;
        Ok(e)
    };
    Ok(ResolvedMap {
        f: Arc::new(f),
        output,
    })
}
