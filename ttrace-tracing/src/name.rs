//! Tracepoint names for `tracing` callsites, stable across machines, builds and edits of
//! the program, so that a `ctl` or `watch` rule written for a name keeps working:
//!
//! - a span, or an event with a name of its own (`info!(name: "flushed", ..)`):
//!   `target::name`;
//! - an event without one (`tracing` names it `event <file>:<line>`, which moves whenever
//!   the file is edited above it): `target::` and its message's first words, joined with
//!   `_` ([`words`]): `info!("started processing request")` in `tower_http::trace::on_request`
//!   is `tower_http::trace::on_request::started_processing_request`, `info!("listening on
//!   {}", addr)` is `app::listening_on`; `target::event` when the message gives no word
//!   (no message, or one that starts with a value).
//!
//! The message is only known when the event happens, so such an event's name is decided at
//! its first event (the first to record it, if several threads race), and kept for the
//! callsite's life ([`crate::callsite`]).
//!
//! Names are one word for `ctl` patterns and readers' columns: whitespace is made `_`.

use tracing_core::Metadata;

/// The most words of a message that a name keeps.
pub(crate) const WORDS: usize = 4;

/// The most bytes of words that a name keeps: a longer word is more likely a value than
/// text.
const WORDS_BYTES: usize = 48;

/// Marks that end a phrase (`error: ..`, `done.`): the word they end is kept, and is the
/// last.
const ENDS: [char; 6] = [':', ',', '.', ';', '!', '?'];

/// The tracepoint name of the callsite `meta`, or `None` for an event named by its message
/// at its first event ([`of_message`]).
pub(crate) fn of(meta: &Metadata<'_>) -> Option<String> {
    if meta.is_event() && meta.name().starts_with("event ") {
        return None;
    }
    Some(one_word(format!("{}::{}", meta.target(), meta.name())))
}

/// The name of an event of `target` without a name of its own, from its message's first
/// text ([`words`]).
pub(crate) fn of_message(target: &str, message: Option<&str>) -> String {
    let words = message.map(words).unwrap_or_default();
    let words = if words.is_empty() { "event" } else { &words };
    one_word(format!("{target}::{words}"))
}

/// The first words of `message`, joined with `_`: up to [`WORDS`], stopping before the
/// first word that holds anything but letters, `_` and `-` (a digit, a path, an address,
/// a quote: a value, which would make the name differ from one event to the next); a word
/// that ends with `:`, `,`, `.`, `;`, `!` or `?` is kept without it and is the last. Empty
/// if the first word is such a value.
pub(crate) fn words(message: &str) -> String {
    let mut out = String::new();
    for word in message.split_whitespace().take(WORDS) {
        let (word, last) = match word.strip_suffix(ENDS) {
            Some(w) => (w, true),
            None => (word, false),
        };
        let text = word.chars().next().is_some_and(char::is_alphabetic)
            && word
                .chars()
                .all(|c| c.is_alphabetic() || c == '_' || c == '-');
        if !text || out.len() + 1 + word.len() > WORDS_BYTES {
            break;
        }
        if !out.is_empty() {
            out.push('_');
        }
        out.push_str(word);
        if last {
            break;
        }
    }
    out
}

/// `name` with its whitespace made `_`.
fn one_word(name: String) -> String {
    if !name.contains(char::is_whitespace) {
        return name;
    }
    name.chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_names_an_event_by_its_first_words() {
        let cases = [
            ("started processing request", "started_processing_request"),
            ("listening on 127.0.0.1:8080", "listening_on"),
            ("retrying after 3 attempts", "retrying_after"),
            ("request done", "request_done"),
            (
                "failed to read the configuration file",
                "failed_to_read_the",
            ),
            ("error: connection refused", "error"),
            ("done.", "done"),
            ("closed", "closed"),
            ("cache_miss for key-space", "cache_miss_for_key-space"),
            ("  leading   spaces\tand tabs ", "leading_spaces_and_tabs"),
            ("reading /srv/data.bin", "reading"),
            ("got \"quoted\" value", "got"),
            ("é déjà vu", "é_déjà_vu"),
            ("42 requests", ""),
            ("/srv/a opened", ""),
            ("-flag given", ""),
            ("", ""),
            (&"a".repeat(60), ""),
        ];
        for (message, words) in cases {
            assert_eq!(super::words(message), words, "{message:?}");
        }
    }

    #[test]
    fn an_event_without_a_message_word_is_target_event() {
        assert_eq!(of_message("app::db", Some("7 rows")), "app::db::event");
        assert_eq!(of_message("app::db", None), "app::db::event");
        assert_eq!(
            of_message(
                "tower_http::trace::on_request",
                Some("started processing request")
            ),
            "tower_http::trace::on_request::started_processing_request"
        );
    }

    struct Cs;
    impl tracing_core::Callsite for Cs {
        fn set_interest(&self, _: tracing_core::Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            unimplemented!()
        }
    }
    static CS: Cs = Cs;

    fn meta(name: &'static str, kind: tracing_core::metadata::Kind) -> Metadata<'static> {
        Metadata::new(
            name,
            "app::server",
            tracing_core::Level::INFO,
            Some("/home/ann/app/src/server.rs"),
            Some(12),
            Some("app::server"),
            tracing_core::field::FieldSet::new(&[], tracing_core::identify_callsite!(&CS)),
            kind,
        )
    }

    #[test]
    fn spans_and_named_events_keep_their_names() {
        use tracing_core::metadata::Kind;
        assert_eq!(
            of(&meta("handle request", Kind::SPAN)).as_deref(),
            Some("app::server::handle_request")
        );
        assert_eq!(
            of(&meta("flushed", Kind::EVENT)).as_deref(),
            Some("app::server::flushed")
        );
        // A span may be called `event ...`: only events are named by their message.
        assert_eq!(
            of(&meta("event loop", Kind::SPAN)).as_deref(),
            Some("app::server::event_loop")
        );
        assert_eq!(of(&meta("event src/server.rs:12", Kind::EVENT)), None);
    }
}
