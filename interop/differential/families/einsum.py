"""Einsum: the equations users write (matrix and batch matrix products, transposes, traces
and diagonals, reductions, outer and elementwise products, broadcasting ellipses) and
TensorFlow's odd corners (labels repeated in the output, spaces as labels), with its errors.
(Output labels no operand has are refused by TensorFlow's shape inference, so no graph holds
them; eagerly its kernel drops them.)

Integers and floats holding small integers must agree bit for bit (every partial sum is
exact); random floats declare a tolerance: TensorFlow sums in Eigen's lanes and blocking
order, ours in order (the same bound as linalg's products)."""

import numpy as np
import tensorflow as tf

from harness import I32_MAX, I32_MIN, Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
REASON = ("Eigen sums einsum's reductions in vector lanes and its products in GEMM blocking "
          "order; ours sums in order with one FMA chain per element. The bound is the classic "
          "one for a sum of k terms in any order, doubled: 2 k eps max(sum of |terms|)")

# (equation, operand shapes)
EQUATIONS = [
    ("ij,jk->ik", [[2, 3], [3, 4]]),
    ("ij,kj->ik", [[2, 3], [4, 3]]),
    ("ji,jk->ik", [[3, 2], [3, 4]]),
    ("ij,jk->ki", [[2, 3], [3, 4]]),
    ("bij,bjk->bik", [[2, 2, 3], [2, 3, 4]]),
    ("bij,bkj->bik", [[2, 2, 3], [2, 4, 3]]),
    ("bij,jk->bik", [[2, 2, 3], [3, 4]]),
    ("ijk,ikl->ijl", [[2, 3, 2], [2, 2, 3]]),
    ("...ij,...jk->...ik", [[5, 2, 3], [3, 4]]),
    ("...ij,...jk->...ik", [[2, 1, 2, 3], [3, 3, 4]]),
    ("i...j,j...k->i...k", [[2, 5, 3], [3, 5, 4]]),
    ("ij->ji", [[2, 3]]),
    ("ijk->kij", [[2, 3, 4]]),
    ("ii->i", [[3, 3]]),
    ("ii->", [[3, 3]]),
    ("iij->ji", [[3, 3, 2]]),
    ("ij->", [[2, 3]]),
    ("ij->i", [[2, 3]]),
    ("ij->j", [[2, 3]]),
    ("...ij->...", [[5, 2, 3]]),
    ("ij...->...", [[2, 3, 5]]),
    ("i,j->ij", [[3], [4]]),
    ("ab,cd->abcd", [[2, 3], [2, 2]]),
    ("i,i->", [[5], [5]]),
    ("i,i->i", [[4], [4]]),
    ("ij,ij->ij", [[2, 3], [2, 3]]),
    ("ij,ij->i", [[2, 3], [2, 3]]),
    ("ij,ij->", [[2, 3], [2, 3]]),
    ("bi,bi->b", [[3, 4], [3, 4]]),
    ("aab,bc->ac", [[2, 2, 3], [3, 4]]),
    ("ij,k->ik", [[2, 3], [4]]),
    ("ij,jk->ikk", [[2, 3], [3, 4]]),
    ("i->ii", [[3]]),
    ("ij->iij", [[2, 3]]),
    ("...,...->...", [[2, 1], [3]]),
    ("...i,...i->...", [[2, 1, 3], [4, 3]]),
    ("ij,jk->...ik", [[2, 3], [3, 4]]),
    ("i j->j i", [[2, 1, 3]]),
    ("->", [[]]),
    (",->", [[], []]),
    ("i,->i", [[3], []]),
    ("ij,jk->ik", [[2, 0], [0, 4]]),
    ("ij,jk->ik", [[0, 3], [3, 4]]),
    ("ij->", [[0, 3]]),
    ("...ij->...", [[0, 2, 3]]),
]


def bound(eq, ops):
    """2 k eps max(sum of |terms|) for a random float case."""
    eps = np.finfo(ops[0].dtype.as_numpy_dtype).eps
    lhs, out = eq.split("->")
    labels = set(lhs.replace(",", "").replace(".", "")) - set(out)
    sizes = {}
    for sub, op in zip(lhs.split(","), ops):
        for c, d in zip(sub, op.shape):
            sizes[c] = d
    k = int(np.prod([sizes[c] for c in labels])) if labels else 1
    terms = np.einsum(eq, *[np.abs(o.numpy()).astype(np.float64) for o in ops])
    return f"abs:{2 * k * eps * float(np.max(terms, initial=0.0)):.3g}"


def family():
    fam = Family("einsum")
    rng = np.random.default_rng(5)

    def add(eq, ops, case_id, tol="exact"):
        fam.add("Einsum", lambda *xs: R.Einsum(inputs=list(xs), equation=eq), ops,
                f"Einsum/{eq}/{case_id}", tolerance=tol,
                reason=None if tol == "exact" else REASON)

    for eq, shapes in EQUATIONS:
        for dt in (tf.float32, tf.int32, tf.int64, tf.float64):
            if dt == tf.float64 and "..." not in eq and "," not in eq:
                continue
            ops = [tf.constant(rng.integers(-4, 5, size=s), dt) for s in shapes]
            add(eq, ops, f"{dt.name} {shapes}")
    # Random floats: sums that round.
    for eq, shapes in [("ij,jk->ik", [[3, 7], [7, 4]]), ("ij->i", [[3, 20]]),
                       ("ij->", [[4, 9]]), ("bij,bjk->bik", [[2, 3, 9], [2, 9, 2]]),
                       ("i,i->", [[30], [30]]), ("ij,ij->i", [[2, 12], [2, 12]]), ("ii->", [[10, 10]]),
                       ("ijk,k->ij", [[2, 3, 11], [11]]), ("ij,k->ik", [[2, 13], [3]])]:
        for dt in (tf.float32, tf.float64):
            ops = [tf.constant(rng.standard_normal(s), dt) for s in shapes]
            add(eq, ops, f"{dt.name} random {shapes}", bound(eq, ops))
    # Exact without sums: transposes, diagonals, outer and elementwise products.
    for eq, shapes in [("ij->ji", [[3, 4]]), ("ii->i", [[4, 4]]), ("i,j->ij", [[3], [5]]),
                       ("ij,ij->ij", [[3, 4], [3, 4]]), ("bij->bji", [[2, 3, 2]])]:
        ops = [tf.constant(rng.standard_normal(s), tf.float32) for s in shapes]
        add(eq, ops, f"float32 random {shapes}")
    # Special values and integer wrapping.
    sp = tf.constant([[nan, 1.0, -0.0], [inf, -inf, 0.0]], tf.float32)
    add("ij->ji", [sp], "special")
    add("ij,ij->ij", [sp, sp], "special")
    add("ij->i", [sp], "special")
    add("ij,jk->ik", [sp, tf.constant([[0.0], [1.0], [-0.0]], tf.float32)], "special")
    add("i,i->i", [tf.constant([-0.0, 1e-40, 3e38]), tf.constant([0.0, 1.0, 10.0])],
        "signed zero, denormal, overflow")
    add("i->", [tf.constant([-0.0, -0.0])], "-0 sums")
    add("i,i->", [tf.constant([I32_MAX, I32_MIN, 3], tf.int32),
                  tf.constant([2, -1, 5], tf.int32)], "int32 wraps")
    # Errors.
    f = tf.ones
    # (Malformed equations, no "->" or three operands, fail TensorFlow's shape inference:
    # no graph holds them.)
    add("ijk->ij", [f([2, 3])], "error/rank")
    add("ij,jk->ik", [f([2, 3]), f([4, 4])], "error/sizes")
    add("ij,j->i", [f([2, 3]), f([1])], "error/no broadcast of named labels")
    add("...,...->...", [f([2]), f([3])], "error/broadcast")
    add("...ij->ij", [f([5, 2, 3])], "error/ellipsis missing in output")
    add("ij,jk->ik", [tf.ones([2, 2], tf.uint8), tf.ones([2, 2], tf.uint8)],
        "error/uint8 (no kernel)")
    return fam
