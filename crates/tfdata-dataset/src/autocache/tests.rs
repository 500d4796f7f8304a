//! Tests of the autocache engine.
