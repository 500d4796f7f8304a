//! `Einsum` with one or two operands, as TensorFlow 2.21's CPU kernel reads
//! equations: exactly one `->`, every other character but `,` and `.` a
//! label (spaces included), `...` for broadcast dimensions aligned from the
//! right, labels repeated in an operand taking its diagonal, labels
//! repeated in the output placing values on a diagonal of zeros. Output
//! labels no operand has are refused, as TensorFlow's shape inference does
//! (so no TensorFlow graph holds them; its kernel, run eagerly, drops them).
//!
//! The arithmetic follows TensorFlow's plan: each operand first sums the
//! labels only it has (in order, from zero), then the two are contracted
//! as a batch matrix product: one in-order chain of fused multiply-adds
//! per output element (`linalg.rs`). Integer results are exact; float ones
//! agree bit for bit where no rounding happens in a sum and otherwise
//! within the bound `docs/compatibility.md` gives for `MatMul` (Eigen sums
//! reductions in vector lanes and products in its blocking order).
//! float16, bfloat16 and complex are refused.

use std::collections::HashMap;

use tfdata_core::{DType, Result, Tensor};

use super::linalg::Mac;
use super::numeric::{Num, at, buffer, dispatch, finish, invalid, out_elements, shape_str};
use super::{Compute, KernelDef, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "Einsum",
    outputs: one_output,
    build,
}];

/// A subscript: a label, or the ellipsis.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Sub {
    Label(char),
    Ellipsis,
}

fn parse_subscripts(op: &str, s: &str) -> Result<Vec<Sub>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '.' {
            if chars.next() != Some('.') || chars.next() != Some('.') {
                return Err(invalid(
                    op,
                    format!("'.' outside an ellipsis in subscripts {s:?}: unsupported"),
                ));
            }
            if out.contains(&Sub::Ellipsis) {
                return Err(invalid(op, format!("more than one ellipsis in {s:?}")));
            }
            out.push(Sub::Ellipsis);
        } else {
            out.push(Sub::Label(c));
        }
    }
    Ok(out)
}

struct Equation {
    text: String,
    inputs: Vec<Vec<Sub>>,
    output: Vec<Sub>,
}

fn parse(op: &str, eq: &str) -> Result<Equation> {
    let parts: Vec<&str> = eq.split("->").collect();
    let [lhs, rhs] = parts.as_slice() else {
        return Err(invalid(
            op,
            format!("Expecting exactly one '->' in einsum equation: {eq}"),
        ));
    };
    let inputs: Vec<&str> = lhs.split(',').collect();
    if !(1..=2).contains(&inputs.len()) {
        return Err(invalid(
            op,
            format!(
                "Expecting 1 or 2 input subscripts in equation '{eq}' but got: {}",
                inputs.len()
            ),
        ));
    }
    Ok(Equation {
        text: eq.to_string(),
        inputs: inputs
            .iter()
            .map(|s| parse_subscripts(op, s))
            .collect::<Result<_>>()?,
        output: parse_subscripts(op, rhs)?,
    })
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let eq = parse(&op, attrs.string("equation")?).map_err(|e| attrs.error(e))?;
    if attrs.has("T") {
        let t = attrs.dtype("T")?;
        if !matches!(
            t,
            DType::Float | DType::Double | DType::Int32 | DType::Int64
        ) {
            return Err(attrs.error(super::numeric::unsupported(&op, t)));
        }
    }
    Ok(Box::new(move |inputs| {
        if inputs.len() != eq.inputs.len() {
            return Err(invalid(
                &op,
                format!(
                    "Expecting {} input subscripts but got {} inputs",
                    eq.inputs.len(),
                    inputs.len()
                ),
            ));
        }
        let d = inputs[0].dtype();
        for (i, t) in inputs.iter().enumerate() {
            super::numeric::expect_dtype(&op, t, i, d)?;
        }
        let out = dispatch!(
            d,
            &op,
            [Float, Double, Int32, Int64],
            einsum(&op, &eq, &inputs)
        )?;
        Ok(vec![out])
    }))
}

/// An operand as labelled values: label ids, their sizes, row-major data.
struct Labelled<T> {
    labels: Vec<usize>,
    dims: Vec<usize>,
    data: Vec<T>,
}

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Calls `f` with each multi-index over `dims`, row-major.
fn each_index(dims: &[usize], mut f: impl FnMut(&[usize])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    loop {
        f(&idx);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// For each of `over` (label ids), the element stride of `t` along it
/// (summed over repeats, so a repeated label walks the diagonal; 0 where
/// `t` lacks it or broadcasts it from size 1).
fn label_strides<T>(t: &Labelled<T>, over: &[usize], sizes: &[usize]) -> Vec<usize> {
    let s = strides(&t.dims);
    over.iter()
        .map(|&l| {
            t.labels
                .iter()
                .zip(&s)
                .zip(&t.dims)
                .filter(|&((&tl, _), &d)| tl == l && !(d == 1 && sizes[l] != 1))
                .map(|((_, &st), _)| st)
                .sum()
        })
        .collect()
}

/// `t` with its repeated labels reduced to their diagonal and the labels
/// in `sum` summed away in row-major order from zero.
fn reduce<T: Num>(t: Labelled<T>, sum: &[usize], sizes: &[usize]) -> Labelled<T> {
    let mut keep: Vec<usize> = Vec::new();
    for &l in &t.labels {
        if !sum.contains(&l) && !keep.contains(&l) {
            keep.push(l);
        }
    }
    let mut summed: Vec<usize> = Vec::new();
    for &l in &t.labels {
        if sum.contains(&l) && !summed.contains(&l) {
            summed.push(l);
        }
    }
    let unique = keep.len() + summed.len() == t.labels.len();
    if unique && summed.is_empty() {
        return t;
    }
    let dim_of = |l: usize| {
        t.labels
            .iter()
            .position(|&x| x == l)
            .map_or(1, |p| t.dims[p])
    };
    let kdims: Vec<usize> = keep.iter().map(|&l| dim_of(l)).collect();
    let sdims: Vec<usize> = summed.iter().map(|&l| dim_of(l)).collect();
    let ks = label_strides(&t, &keep, sizes);
    let ss = label_strides(&t, &summed, sizes);
    let mut data = Vec::with_capacity(kdims.iter().product());
    each_index(&kdims, |k| {
        let base: usize = k.iter().zip(&ks).map(|(i, s)| i * s).sum();
        if summed.is_empty() {
            data.push(t.data.get(base).copied().unwrap_or(T::ZERO));
            return;
        }
        let mut acc = T::ZERO;
        each_index(&sdims, |s| {
            let off = base + s.iter().zip(&ss).map(|(i, st)| i * st).sum::<usize>();
            acc = acc.add(t.data.get(off).copied().unwrap_or(T::ZERO)).ftz();
        });
        data.push(acc);
    });
    Labelled {
        labels: keep,
        dims: kdims,
        data,
    }
}

fn einsum<T: Mac + Num>(op: &str, eq: &Equation, inputs: &[Tensor]) -> Result<Tensor> {
    // Broadcast dimensions: as many as the widest ellipsis, aligned right.
    let mut ell = vec![0usize; inputs.len()];
    for (k, (subs, t)) in eq.inputs.iter().zip(inputs).enumerate() {
        let named = subs.iter().filter(|s| **s != Sub::Ellipsis).count();
        let rank = t.shape().len();
        if subs.contains(&Sub::Ellipsis) {
            if rank < named {
                return Err(invalid(
                    op,
                    format!("Expected input {k} to have rank at least {named} but got: {rank}"),
                ));
            }
            ell[k] = rank - named;
        } else if rank != named {
            return Err(invalid(
                op,
                format!("Expected input {k} to have rank {named} but got: {rank}"),
            ));
        }
    }
    let bcast = ell.iter().copied().max().unwrap_or(0);
    // Label ids: broadcast dimensions first, then named labels in order.
    let mut ids: HashMap<char, usize> = HashMap::new();
    let mut sizes: Vec<usize> = vec![1; bcast];
    let mut operands: Vec<Labelled<T>> = Vec::new();
    let mut conflict = false;
    for (k, (subs, t)) in eq.inputs.iter().zip(inputs).enumerate() {
        let b = buffer(op, t)?;
        let mut labels = Vec::new();
        for s in subs {
            match s {
                Sub::Ellipsis => labels.extend(bcast - ell[k]..bcast),
                Sub::Label(c) => {
                    let next = bcast + ids.len();
                    labels.push(*ids.entry(*c).or_insert(next));
                }
            }
        }
        let dims: Vec<usize> = t.shape().iter().map(|&d| d.max(0) as usize).collect();
        for (axis, (&l, &d)) in labels.iter().zip(&dims).enumerate() {
            if l >= sizes.len() {
                sizes.resize(l + 1, usize::MAX);
            }
            let known = sizes[l];
            if l < bcast {
                // Two operands' broadcast dimensions that disagree fail
                // later, when TF multiplies them (below).
                if known == 1 || known == d {
                    sizes[l] = d;
                } else if d != 1 {
                    conflict = true;
                }
            } else if known == usize::MAX {
                sizes[l] = d;
            } else if known != d {
                return Err(invalid(
                    op,
                    format!(
                        "Expected dimension {known} at axis {axis} of the input shaped {} but \
                         got dimension {d}",
                        shape_str(t.shape())
                    ),
                ));
            }
        }
        let data = (0..t.num_elements() as usize)
            .map(|i| at::<T>(b, i).ftz())
            .collect();
        operands.push(Labelled { labels, dims, data });
    }
    let mut out_labels: Vec<usize> = Vec::new();
    if !eq.output.contains(&Sub::Ellipsis) && bcast > 0 {
        return Err(invalid(
            op,
            format!(
                "Output contains {bcast} broadcasting dimension(s) but no ellipsis (...) was \
                 found in the output subscripts."
            ),
        ));
    }
    for s in &eq.output {
        match s {
            Sub::Ellipsis => out_labels.extend(0..bcast),
            Sub::Label(c) => match ids.get(c) {
                Some(&l) => out_labels.push(l),
                None => {
                    return Err(invalid(
                        op,
                        format!(
                            "Einsum output subscripts for equation '{}' has label '{c}' which \
                             is not present in the input subscripts",
                            eq.text
                        ),
                    ));
                }
            },
        }
    }
    let mut unique_out: Vec<usize> = Vec::new();
    for &l in &out_labels {
        if !unique_out.contains(&l) {
            unique_out.push(l);
        }
    }
    if conflict {
        return Err(broadcast_error(
            op,
            &operands,
            &unique_out,
            &ell,
            bcast,
            &sizes,
        ));
    }
    // Each operand sums the labels only it has.
    let in_other = |k: usize, l: usize| {
        operands
            .iter()
            .enumerate()
            .any(|(j, o)| j != k && o.labels.contains(&l))
    };
    let mut reduced = Vec::new();
    for (k, t) in operands.iter().enumerate() {
        let sum: Vec<usize> = t
            .labels
            .iter()
            .copied()
            .filter(|&l| !unique_out.contains(&l) && !in_other(k, l))
            .collect();
        reduced.push(sum);
    }
    let operands: Vec<Labelled<T>> = operands
        .into_iter()
        .zip(&reduced)
        .map(|(t, sum)| reduce(t, sum, &sizes))
        .collect();
    // The contraction: labels both operands have that the output lacks, in
    // the first operand's order.
    let contracted: Vec<usize> = match operands.as_slice() {
        [a, b] => a
            .labels
            .iter()
            .copied()
            .filter(|l| b.labels.contains(l) && !unique_out.contains(l))
            .collect(),
        _ => Vec::new(),
    };
    let udims: Vec<usize> = unique_out.iter().map(|&l| sizes[l]).collect();
    let cdims: Vec<usize> = contracted.iter().map(|&l| sizes[l]).collect();
    let shape: Vec<i64> = out_labels.iter().map(|&l| sizes[l] as i64).collect();
    let n = out_elements(op, T::DTYPE, &shape)?;
    let core_n = out_elements(
        op,
        T::DTYPE,
        &udims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
    )?;
    let mut core: Vec<T> = Vec::with_capacity(core_n);
    match operands.as_slice() {
        [a] => {
            let s = label_strides(a, &unique_out, &sizes);
            each_index(&udims, |o| {
                let off: usize = o.iter().zip(&s).map(|(i, st)| i * st).sum();
                core.push(a.data.get(off).copied().unwrap_or(T::ZERO));
            });
        }
        [a, b] => {
            let (sa, sb) = (
                label_strides(a, &unique_out, &sizes),
                label_strides(b, &unique_out, &sizes),
            );
            let (ca, cb) = (
                label_strides(a, &contracted, &sizes),
                label_strides(b, &contracted, &sizes),
            );
            each_index(&udims, |o| {
                let oa: usize = o.iter().zip(&sa).map(|(i, st)| i * st).sum();
                let ob: usize = o.iter().zip(&sb).map(|(i, st)| i * st).sum();
                let mut acc = T::ZERO;
                let mut step = |c: &[usize]| {
                    let xa = oa + c.iter().zip(&ca).map(|(i, st)| i * st).sum::<usize>();
                    let xb = ob + c.iter().zip(&cb).map(|(i, st)| i * st).sum::<usize>();
                    let (p, q) = (
                        a.data.get(xa).copied().unwrap_or(T::ZERO),
                        b.data.get(xb).copied().unwrap_or(T::ZERO),
                    );
                    acc = acc.mac(p, q);
                };
                if cdims.is_empty() {
                    // Nothing to contract: TF multiplies elementwise (so
                    // -0.0 products stay -0.0), not through a product.
                    let p = a.data.get(oa).copied().unwrap_or(T::ZERO);
                    let q = b.data.get(ob).copied().unwrap_or(T::ZERO);
                    acc = p.mul(q).ftz();
                } else {
                    each_index(&cdims, &mut step);
                }
                core.push(acc);
            });
        }
        _ => {}
    }
    // Lay the result out in the output's order; repeated output labels
    // put it on a diagonal of zeros.
    let pos: Vec<usize> = out_labels
        .iter()
        .map(|l| unique_out.iter().position(|u| u == l).unwrap_or(0))
        .collect();
    let cs = strides(&udims);
    let odims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let mut out = vec![0u8; n * T::SIZE];
    let mut slots = out.chunks_exact_mut(T::SIZE);
    let mut u = vec![0usize; udims.len()];
    each_index(&odims, |o| {
        let mut on_diagonal = true;
        let mut seen = vec![false; udims.len()];
        for (&i, &p) in o.iter().zip(&pos) {
            if seen[p] && u[p] != i {
                on_diagonal = false;
            }
            seen[p] = true;
            u[p] = i;
        }
        let v = if on_diagonal {
            let off: usize = u.iter().zip(&cs).map(|(i, s)| i * s).sum();
            core.get(off).copied().unwrap_or(T::ZERO)
        } else {
            T::ZERO
        };
        if let Some(slot) = slots.next() {
            v.set(slot);
        }
    });
    finish(T::DTYPE, shape, out)
}

/// TensorFlow's error for two operands whose broadcast dimensions
/// disagree: each operand as its batch matrix product sees it (its own
/// broadcast dimensions, the shared batch labels, then rows and columns).
fn broadcast_error<T>(
    op: &str,
    operands: &[Labelled<T>],
    out: &[usize],
    ell: &[usize],
    bcast: usize,
    sizes: &[usize],
) -> tfdata_core::Error {
    let (Some(a), Some(b)) = (operands.first(), operands.get(1)) else {
        return invalid(op, "Invalid broadcasting dimensions");
    };
    let named = |t: &Labelled<T>, l: usize| l >= bcast && t.labels.contains(&l);
    let product = |f: &dyn Fn(usize) -> bool| -> usize {
        let mut seen = Vec::new();
        for t in [a, b] {
            for &l in &t.labels {
                if f(l) && !seen.contains(&l) {
                    seen.push(l);
                }
            }
        }
        seen.iter().map(|&l| sizes[l]).product()
    };
    let batch: Vec<usize> = a
        .labels
        .iter()
        .copied()
        .filter(|&l| named(a, l) && named(b, l) && out.contains(&l))
        .collect();
    let m = product(&|l| named(a, l) && !b.labels.contains(&l) && out.contains(&l));
    let n = product(&|l| named(b, l) && !a.labels.contains(&l) && out.contains(&l));
    let k = product(&|l| named(a, l) && named(b, l) && !out.contains(&l));
    let dims = |t: &Labelled<T>, e: usize, tail: [usize; 2]| -> String {
        let own = t.labels.iter().zip(&t.dims).filter(|(l, _)| **l < bcast);
        let mut d: Vec<i64> = own.map(|(_, &d)| d as i64).take(e).collect();
        d.extend(batch.iter().map(|&l| sizes[l] as i64));
        d.extend(tail.iter().map(|&x| x as i64));
        shape_str(&d)
    };
    invalid(
        op,
        format!(
            "Invalid broadcasting dimensions: {} vs. {}",
            dims(a, ell[0], [m, k]),
            dims(b, ell.get(1).copied().unwrap_or(0), [k, n])
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, string};
    use tfdata_core::Tensor;

    fn einsum(eq: &str, inputs: Vec<Tensor>) -> Vec<i32> {
        run("Einsum", &[("equation", string(eq))], inputs).unwrap()[0]
            .to_vec::<i32>()
            .unwrap()
    }

    #[test]
    fn common_equations() {
        let a = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], vec![2, 3]).unwrap();
        let b = Tensor::from_slice(&[1i32, 0, 0, 1, 1, 1], vec![3, 2]).unwrap();
        assert_eq!(einsum("ij,jk->ik", vec![a.clone(), b]), vec![4, 5, 10, 11]);
        assert_eq!(einsum("ij->ji", vec![a.clone()]), vec![1, 4, 2, 5, 3, 6]);
        assert_eq!(einsum("ij->", vec![a.clone()]), vec![21]);
        assert_eq!(einsum("ij,ij->i", vec![a.clone(), a.clone()]), vec![14, 77]);
        let sq = Tensor::from_slice(&[1i32, 2, 3, 4], vec![2, 2]).unwrap();
        assert_eq!(einsum("ii->i", vec![sq.clone()]), vec![1, 4]);
        assert_eq!(einsum("ii->", vec![sq.clone()]), vec![5]);
        assert_eq!(
            einsum("i->ii", vec![Tensor::vector(&[7i32, 8])]),
            vec![7, 0, 0, 8]
        );
        assert!(
            run(
                "Einsum",
                &[("equation", string("ij,jk"))],
                vec![a.clone(), a]
            )
            .is_err()
        );
    }
}
