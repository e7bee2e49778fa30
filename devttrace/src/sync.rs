//! The atomic word the protocols are written against.
//!
//! The entry and aux protocols are generic over [`AtomicWord`] so that the very same code runs
//! on the memory-mapped device (with `core` atomics) and under the loom model checker (with
//! loom's atomics, when built with `--cfg loom`).
//!
//! **Loads a reader makes.** A reader maps the device read-only (`PROT_READ`), and Rust
//! defines only one kind of atomic access on read-only memory: a `Relaxed` load of at most
//! the target's word (`core::sync::atomic`, *Atomic accesses to read-only memory*; an
//! `Acquire` load there works on the targets ttrace runs on, but is not guaranteed to). So
//! every load of the reader halves that needs Acquire is [`AtomicWord::load_acquire`]: a
//! `Relaxed` load then an `Acquire` fence, which is at least as strong, and the form the
//! standard library recommends for read-only memory.

pub use core::sync::atomic::Ordering;

/// A 64-bit atomic word and the fence that goes with it.
pub trait AtomicWord: Sync + Sized {
    /// A new word holding `value`.
    fn new(value: u64) -> Self;
    /// Atomic load.
    fn load(&self, order: Ordering) -> u64;
    /// Atomic store.
    fn store(&self, value: u64, order: Ordering);
    /// Atomic add, returning the previous value.
    fn fetch_add(&self, value: u64, order: Ordering) -> u64;
    /// Atomic compare-and-exchange.
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64>;
    /// A memory fence of the same memory model as the word.
    fn fence(order: Ordering);

    /// An Acquire load made as a reader of a read-only mapping makes it (see the module
    /// documentation): a `Relaxed` load, then an `Acquire` fence. At least as strong as
    /// `load(Acquire)`: the fence orders every later access after the load, and if the
    /// load read a value a Release store (or a store after a Release fence) wrote, the
    /// fence synchronizes with it.
    #[inline(always)]
    fn load_acquire(&self) -> u64 {
        let v = self.load(Ordering::Relaxed);
        Self::fence(Ordering::Acquire);
        v
    }
}

/// A budget of `n` steps for the models of restartable sequences: each call says whether
/// one more store may be made (`usize::MAX`: a whole write).
pub(crate) fn steps(n: usize) -> impl FnMut() -> bool {
    let mut left = n;
    move || {
        let go = left > 0;
        left = left.saturating_sub(1);
        go
    }
}

macro_rules! impl_atomic_word {
    ($ty:ty, $fence:path) => {
        impl AtomicWord for $ty {
            fn new(value: u64) -> Self {
                <$ty>::new(value)
            }
            #[inline(always)]
            fn load(&self, order: Ordering) -> u64 {
                <$ty>::load(self, order)
            }
            #[inline(always)]
            fn store(&self, value: u64, order: Ordering) {
                <$ty>::store(self, value, order)
            }
            #[inline(always)]
            fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
                <$ty>::fetch_add(self, value, order)
            }
            #[inline(always)]
            fn compare_exchange(
                &self,
                current: u64,
                new: u64,
                success: Ordering,
                failure: Ordering,
            ) -> Result<u64, u64> {
                <$ty>::compare_exchange(self, current, new, success, failure)
            }
            #[inline(always)]
            fn fence(order: Ordering) {
                $fence(order)
            }
        }
    };
}

impl_atomic_word!(core::sync::atomic::AtomicU64, core::sync::atomic::fence);
#[cfg(loom)]
impl_atomic_word!(loom::sync::atomic::AtomicU64, loom::sync::atomic::fence);
