//! A loser tree: the smallest of `k` keys, found again after one changes with one comparison
//! per level of a balanced tree.
//!
//! Merging `k` time-ordered rings asks, for every event, which ring's next event is the
//! earliest, then moves that ring on. A scan of the heads costs `k` comparisons an event, a
//! binary heap two per level (sift down compares both children). A loser tree keeps at each
//! inner node the *loser* of the match played there; when the winner's key changes, only the
//! matches on its path to the root are replayed, each against the loser stored there: one
//! comparison per level, `log2 k` in all, and none at all for one ring.
//!
//! Layout: `m` leaves (`k` rounded up to a power of two; missing leaves hold the largest key
//! and never win), inner nodes `1..m` stored in `losers` as in a heap (node `n`'s children
//! are `2n` and `2n + 1`; leaf `i` is node `m + i`), and the overall winner in `losers[0]`.

/// The smallest of `k` keys (ties: the lowest index), kept up to date as keys change.
///
/// ```
/// use ttrace_reader::tournament::LoserTree;
/// let mut t = LoserTree::new(vec![5u64, 3, 9]);
/// assert_eq!(t.winner(), 1);
/// t.set_winner(7); // key 1 is now 7
/// assert_eq!(t.winner(), 0);
/// ```
#[derive(Clone, Debug)]
pub struct LoserTree<K> {
    /// Each leaf's key; leaves past the `k` given hold `K::max_value()`.
    keys: Vec<K>,
    /// `losers[0]`: the winner; `losers[n]`, `1 <= n < m`: the loser of the match at node `n`.
    losers: Vec<u32>,
}

/// A key of a [`LoserTree`]: ordered, with a largest value for the leaves that pad the tree
/// (a padding leaf loses every match it plays, a tie included, since it has the higher index).
pub trait Key: Copy + Ord {
    /// The largest key.
    const MAX: Self;
}

impl Key for u64 {
    const MAX: u64 = u64::MAX;
}

impl Key for u128 {
    const MAX: u128 = u128::MAX;
}

impl<K: Key> LoserTree<K> {
    /// The tree over `keys` (at least one).
    pub fn new(mut keys: Vec<K>) -> LoserTree<K> {
        let m = keys.len().max(1).next_power_of_two();
        keys.resize(m, K::MAX);
        let mut tree = LoserTree {
            keys,
            losers: vec![0; m],
        };
        tree.losers[0] = tree.play(1);
        tree
    }

    /// Plays the matches of the subtree at `node`, storing their losers; its winner.
    fn play(&mut self, node: usize) -> u32 {
        let m = self.keys.len();
        if node >= m {
            return (node - m) as u32;
        }
        let (a, b) = (self.play(2 * node), self.play(2 * node + 1));
        let (win, lose) = match self.beats(b, a) {
            true => (b, a),
            false => (a, b),
        };
        self.losers[node] = lose;
        win
    }

    /// Whether leaf `a` beats leaf `b`: a smaller key, or an equal key and a lower index.
    #[inline(always)]
    fn beats(&self, a: u32, b: u32) -> bool {
        let (ka, kb) = (self.keys[a as usize], self.keys[b as usize]);
        ka < kb || (ka == kb && a < b)
    }

    /// The index of the smallest key (the lowest such index).
    #[inline(always)]
    pub fn winner(&self) -> usize {
        self.losers[0] as usize
    }

    /// The smallest key.
    #[inline(always)]
    pub fn winning_key(&self) -> K {
        self.keys[self.winner()]
    }

    /// Changes the winner's key to `key` and finds the new winner: the matches on the
    /// winner's path to the root are replayed against the losers stored there.
    #[inline]
    pub fn set_winner(&mut self, key: K) {
        let m = self.keys.len();
        let mut win = self.losers[0];
        self.keys[win as usize] = key;
        let mut node = (win as usize + m) / 2;
        while node >= 1 {
            let other = self.losers[node];
            if self.beats(other, win) {
                self.losers[node] = win;
                win = other;
            }
            node /= 2;
        }
        self.losers[0] = win;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merging runs through the tree gives what sorting them all together gives (stable:
    /// equal keys in run order), for every number of runs up to 17.
    #[test]
    fn merges_like_a_stable_sort() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for k in 1..=17 {
            let runs: Vec<Vec<u64>> = (0..k)
                .map(|_| {
                    let mut r: Vec<u64> = (0..rand() % 40).map(|_| rand() % 50).collect();
                    r.sort_unstable();
                    r
                })
                .collect();
            let mut expected: Vec<(u64, usize)> = runs
                .iter()
                .enumerate()
                .flat_map(|(i, r)| r.iter().map(move |&s| (s, i)))
                .collect();
            expected.sort_by_key(|&(s, _)| s);
            let head = |r: &Vec<u64>, p: usize| r.get(p).copied().unwrap_or(u64::MAX);
            let mut pos = vec![0; k];
            let mut tree = LoserTree::new(runs.iter().map(|r| head(r, 0)).collect());
            let mut got = Vec::new();
            while pos[tree.winner()] < runs[tree.winner()].len() {
                let w = tree.winner();
                got.push((tree.winning_key(), w));
                pos[w] += 1;
                tree.set_winner(head(&runs[w], pos[w]));
            }
            assert_eq!(got, expected, "{k} runs");
        }
    }
}
