//! The async span tests ([`common::async_spans`]) with `ttrace_tracing::subscriber()`, the
//! subscriber of ttrace's own.

#[path = "common/async_spans.rs"]
mod async_spans;

fn install() {
    tracing::subscriber::set_global_default(ttrace_tracing::subscriber()).unwrap();
}

/// The subscriber's own bookkeeping: a span closes when its last handle is dropped, once;
/// the current span is the innermost entered, and a span made inside it is its child.
#[test]
fn a_span_closes_with_its_last_handle_and_children_name_their_parent() {
    async_spans::device();
    let outer = tracing::info_span!(target: "handles", "outer", n = 1u64);
    let copy = outer.clone();
    let inner = {
        let _entered = outer.enter();
        assert_eq!(tracing::Span::current().id(), outer.id());
        let inner = tracing::info_span!(target: "handles", "inner", n = 2u64);
        inner.in_scope(|| assert_eq!(tracing::Span::current().id(), inner.id()));
        assert_eq!(tracing::Span::current().id(), outer.id());
        inner
    };
    assert_eq!(tracing::Span::current().id(), None);
    drop(inner);
    drop(outer);
    let (closed, open) = async_spans::instances_and_open("handles::outer");
    assert_eq!((closed.len(), open), (0, 1), "a handle is left");
    drop(copy);
    let outer = async_spans::instances("handles::outer");
    let inner = async_spans::instances("handles::inner");
    assert_eq!((outer.len(), inner.len()), (1, 1));
    assert_eq!(inner[0].1.parent(), Some(outer[0].1.id));
    assert_eq!(outer[0].1.polls.len(), 1);
}
