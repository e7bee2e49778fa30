//! Catching the slow request: a program that writes two million events a second, and an
//! axum service with `tracing`, and the ways a snapshot keeps their slow requests (the
//! program's trigger, its panic hook, a watcher, rules installed with `ctl`). A binary of its own: each test loads both CPUs of
//! a small machine, so nothing else of the suite runs beside them (they take turns among
//! themselves).

mod runtime;
mod service;
mod slow_request;
