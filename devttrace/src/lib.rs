//! The ttrace device interface for readers (filled in by the devttrace issue).
