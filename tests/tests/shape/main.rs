//! The shape of the code, checked from outside: trace points that must not compile do not,
//! naming the fault (`compile_errors`), and each library crate keeps its layers
//! (`layering`).

mod compile_errors;
mod layering;
