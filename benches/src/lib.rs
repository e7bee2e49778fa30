//! Measurement helpers.
