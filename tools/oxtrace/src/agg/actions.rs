//! The D actions on aggregations: `clear`, `trunc`, `normalize` and `denormalize`.

use super::entries::{key_hash, Entries};
use super::{AggTable, AggTableError, SortOrder};

impl AggTable {
    /// `clear(@a)`: every value back to the function's initial value, keys kept (DTrace).
    pub fn clear(&mut self, id: u32) -> Result<(), AggTableError> {
        let (func, st) = self.state_mut(id)?;
        for v in st.entries.values_mut() {
            func.init(v);
        }
        Ok(())
    }

    /// `trunc(@a, n)`: keep the `n` largest entries (`n > 0`), the `|n|` smallest
    /// (`n < 0`), or none (`n == 0`).
    pub fn trunc(&mut self, id: u32, n: i64) -> Result<(), AggTableError> {
        let keep: Vec<Box<[u8]>> = {
            let sorted = self.sorted(id, SortOrder::default())?;
            let k = (n.unsigned_abs() as usize).min(sorted.len());
            let range = if n > 0 {
                sorted.len() - k..sorted.len()
            } else {
                0..k
            };
            sorted[range].iter().map(|e| e.key.bytes().into()).collect()
        };
        let (func, st) = self.state_mut(id)?;
        st.entries.index();
        let mut kept = Entries::new(func.value_words());
        for k in keep {
            if let Some(i) = st.entries.find(key_hash(&k), &k) {
                let v = st.entries.value(i);
                kept.insert(key_hash(&k), &k, |out| out.copy_from_slice(v));
            }
        }
        st.entries = kept;
        Ok(())
    }

    /// `normalize(@a, n)`: values print divided by `n` (0 is treated as 1).
    pub fn normalize(&mut self, id: u32, n: u64) -> Result<(), AggTableError> {
        self.state_mut(id)?.1.normal = n.max(1);
        Ok(())
    }

    /// `denormalize(@a)`.
    pub fn denormalize(&mut self, id: u32) -> Result<(), AggTableError> {
        self.normalize(id, 1)
    }
}
