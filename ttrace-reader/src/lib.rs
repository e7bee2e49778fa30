//! Decoding ttrace traces to text (filled in by the devttrace/ttrace-reader issue).
