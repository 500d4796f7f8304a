#!/bin/sh
# Regenerates the layout kernels' TensorFlow-checked tests: runs every case
# through TensorFlow's raw ops and writes the Rust test modules (header.rs
# and slice_header.rs hold the hand-written tests and helpers).
# Usage: PYTHON=~/.cache/tfdata-tf-2.21/bin/python ./assemble.sh
set -e
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
KERNELS=../../src/kernels
gen() {
    "$PYTHON" gen.py "$1" > /tmp/layout_cases_body.rs 2> /tmp/layout_cases_err.txt || { cat /tmp/layout_cases_err.txt; exit 1; }
    grep NOTE /tmp/layout_cases_err.txt || true
    { cat "$2"; echo; sed '1s/^}$//' /tmp/layout_cases_body.rs | sed 's/^fn \([a-z_]*\)() {/fn tf_\1() {/'; echo "}"; } > "$3"
}
gen shape_cases.py header.rs "$KERNELS/shape_tests.rs"
gen slice_cases.py slice_header.rs "$KERNELS/slice_tests.rs"
cargo fmt -p tfdata-graph
