// SPDX-License-Identifier: GPL-2.0

//! The hash table, in probe context: lookup, allocation and deletion of a variable in one
//! walk of its bucket's chain, without a lock but the bucket's deletion lock.

use super::*;

impl<'a> Dstate<'a> {
    /// Finds the variable named by `keys`; no lock, no allocation.
    #[inline(always)]
    pub fn lookup<T: Tuple + ?Sized>(&self, keys: &T) -> Result<Option<VarRef<'a>>, DynvarError> {
        Ok(self
            .dynvar(0, 0, keys, Op::Lookup)?
            .map(|c| self.value_of(c)))
    }

    /// Value word 0 of the variable; 0 when it does not exist.
    #[inline(always)]
    pub fn load<T: Tuple + ?Sized>(&self, keys: &T) -> Result<u64, DynvarError> {
        Ok(self
            .dynvar(0, 0, keys, Op::Lookup)?
            .map_or(0, |c| self.first_word(c).get()))
    }

    /// [`Dstate::load`], noting in `found` the chunk of the variable (`None` when it does not
    /// exist), for a [`Dstate::store_noted`] of 0 later in the firing.
    #[inline(always)]
    pub fn load_noting<T: Tuple + ?Sized>(
        &self,
        keys: &T,
        found: &mut Option<u32>,
    ) -> Result<u64, DynvarError> {
        let c = self.dynvar(0, 0, keys, Op::Lookup)?;
        *found = c;
        Ok(c.map_or(0, |c| self.first_word(c).get()))
    }

    /// [`Dstate::load_noting`] of a variable that only the caller's context ever creates,
    /// stores or deletes: a thread-local variable of the running thread, whose key holds its
    /// thread id. It looks in chunk `*found` first (noted by an earlier load or store on this
    /// CPU, perhaps in an earlier firing) and walks the chain only when that chunk does not
    /// hold `keys`.
    ///
    /// Why the chunk needs no walk: a chunk whose hash is not [`HASH_FREE`] and whose words
    /// hold `keys` was filled by this thread. Its allocation either linked it, and then only
    /// this thread's deletion unlinks it, marking it free first under the bucket lock; or lost
    /// the race to link it and marked it free before the thread went on. The thread is here,
    /// so neither is half done. A chunk refilled meanwhile for another tuple shows its new
    /// hash only after its new keys (release, acquire), and cannot be refilled a second time
    /// while this CPU is in probe context: that takes a cleaner pass, whose cross-calls wait
    /// for it. For any other variable (an associative array's element, which other CPUs
    /// store and delete) a chunk holding `keys` may be another CPU's allocation that is about
    /// to lose its race: only [`Dstate::load_noting`] is right there.
    #[inline(always)]
    pub fn load_own<T: Tuple + ?Sized>(
        &self,
        keys: &T,
        found: &mut Option<u32>,
    ) -> Result<u64, DynvarError> {
        if let Some(c) = *found {
            if self.is_chunk(c)
                && self.w(c, W_HASH).0.load(Acquire) != HASH_FREE
                && self.keys_match(c, keys)
            {
                return Ok(self.first_word(c).get());
            }
        }
        self.load_noting(keys, found)
    }

    /// The variable, allocated on `cpu` with `value_bytes` of zeroed value space if it does
    /// not exist yet (an existing variable is never allocated again). `var` is the
    /// variable id whose drop counter counts a failure.
    #[inline(always)]
    pub fn get_or_alloc<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        value_bytes: usize,
    ) -> Result<VarRef<'a>, DynvarError> {
        Ok(self.value_of(self.alloc(cpu, var, keys, value_bytes)?))
    }

    /// The chunk of [`Dstate::get_or_alloc`]'s variable.
    #[inline(always)]
    fn alloc<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        value_bytes: usize,
    ) -> Result<u32, DynvarError> {
        match self.dynvar(cpu, var, keys, Op::Alloc(value_words(value_bytes)))? {
            Some(c) => Ok(c),
            // An allocation returns a chunk or an error; never reached.
            None => Err(DynvarError::Contended),
        }
    }

    /// Stores a scalar; storing 0 deletes the variable.
    #[inline(always)]
    pub fn store<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        value: u64,
    ) -> Result<(), DynvarError> {
        self.store_noted(cpu, var, keys, value, &mut None)
    }

    /// [`Dstate::store`], taking the chunk a [`Dstate::load_noting`] noted in `found`: a
    /// store of 0 deletes from there ([`Dstate::delete_found`]). Any other store notes the
    /// chunk it stored into, for a [`Dstate::load_own`] in a later firing (the latency
    /// script's return probe). Whatever `found` names, the store is the same.
    #[inline(always)]
    pub fn store_noted<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        value: u64,
        found: &mut Option<u32>,
    ) -> Result<(), DynvarError> {
        match found.take() {
            Some(c) if value == 0 => self.delete_found(cpu, keys, c).map(|_| ()),
            _ if value == 0 => self.delete(cpu, keys).map(|_| ()),
            _ => {
                let c = self.alloc(cpu, var, keys, VALUE_BYTES)?;
                self.first_word(c).set(value);
                *found = Some(c);
                Ok(())
            }
        }
    }

    /// Stores a string value of `value_bytes` bytes of space (truncated to it); storing the
    /// empty string deletes the variable, as storing 0 deletes an integer.
    #[inline(always)]
    pub fn store_bytes<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        bytes: &[u8],
        value_bytes: usize,
    ) -> Result<(), DynvarError> {
        if bytes.is_empty() {
            return self.delete(cpu, keys).map(|_| ());
        }
        self.get_or_alloc(cpu, var, keys, value_bytes)?
            .write_bytes(bytes);
        Ok(())
    }

    /// Copies a string value into `out` (up to its NUL or `out.len()` bytes); returns its
    /// length, 0 when the variable does not exist.
    #[inline(always)]
    pub fn load_bytes<T: Tuple + ?Sized>(
        &self,
        keys: &T,
        out: &mut [u8],
    ) -> Result<usize, DynvarError> {
        let Some(v) = self.lookup(keys)? else {
            return Ok(0);
        };
        let n = v.read_bytes(out);
        // PANIC: `n <= out.len()` (`read_bytes`).
        Ok(out[..n].iter().position(|&c| c == 0).unwrap_or(n))
    }

    /// `x += delta` (and `x++`): allocates when absent, deletes when the result is 0; returns
    /// the new value.
    pub fn add<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        delta: u64,
    ) -> Result<u64, DynvarError> {
        if delta == 0 {
            return self.load(keys);
        }
        let v = self.get_or_alloc(cpu, var, keys, 8)?.fetch_add(delta);
        if v == 0 {
            self.delete(cpu, keys)?;
        }
        Ok(v)
    }

    /// Deletes the variable: unlinks it under the bucket lock and puts its chunk on `cpu`'s
    /// dirty list. Returns whether it existed.
    pub fn delete<T: Tuple + ?Sized>(&self, cpu: usize, keys: &T) -> Result<bool, DynvarError> {
        Ok(self.dynvar(cpu, 0, keys, Op::Delete)?.is_some())
    }

    /// [`Dstate::delete`] of the variable that a lookup of the same `keys` found in chunk
    /// `chunk` ([`VarRef::chunk`]): the latency script's return clause reads `self->ts`, then
    /// sets it to 0. Under the bucket lock, which keeps every other deletion out, it checks
    /// that the chunk still holds `keys` and looks for it on its chain by index, without
    /// hashing the tuple or comparing keys at each step; when that fails (an insertion swung
    /// the head meanwhile) it deletes as [`Dstate::delete`] does.
    ///
    /// Any `chunk` is safe, even one noted in an earlier firing: the checks under the lock
    /// admit only a live chunk that holds `keys` and is on its chain, which is the variable.
    // Inlined: the walk of the fallback starts from the caller's frame, not from below
    // `delete_at`'s, on the probe's stack.
    #[inline(always)]
    pub fn delete_found<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        keys: &T,
        chunk: u32,
    ) -> Result<bool, DynvarError> {
        if self.delete_at(cpu, keys, chunk)? {
            return Ok(true);
        }
        self.delete(cpu, keys)
    }

    /// [`Dstate::delete_found`] of `chunk`; false when it did not delete it there.
    #[inline(never)]
    fn delete_at<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        keys: &T,
        chunk: u32,
    ) -> Result<bool, DynvarError> {
        let me = self.cpu(cpu)?;
        if !self.is_chunk(chunk) {
            return Ok(false);
        }
        let hash = self.w(chunk, W_HASH).0.load(Acquire);
        if hash == HASH_FREE {
            return Ok(false);
        }
        // PANIC: `bucket_of` is below `nchunks`, the number of buckets (type invariant).
        let bucket = &self.buckets[self.bucket_of(hash)];
        let locked = lock_bucket(bucket);
        // Checked again under the lock: a deletion may have gone first.
        let mut done = false;
        if self.w(chunk, W_HASH).0.load(Acquire) == hash && self.keys_match(chunk, keys) {
            // No deletion can change the chain now, and insertions only push at its head.
            let mut prev = NIL;
            let mut cur = bucket.head.load(Acquire);
            let mut steps = 0u32;
            while self.is_chunk(cur) && steps <= self.layout.nchunks {
                if cur == chunk {
                    done = self.unlink(bucket, prev, cur);
                    break;
                }
                steps += 1;
                prev = cur;
                cur = self.w(cur, W_NEXT).0.load(Acquire) as u32;
            }
        }
        if done {
            self.retire(Some(me), chunk);
        }
        bucket.lock.store(locked.wrapping_add(1), Release);
        Ok(done)
    }

    /// Lookup, allocation and deletion in one walk of the chain.
    fn dynvar<T: Tuple + ?Sized>(
        &self,
        cpu: usize,
        var: u32,
        keys: &T,
        op: Op,
    ) -> Result<Option<u32>, DynvarError> {
        if keys.nkeys() == 0 || keys.nkeys() > MAX_KEYS {
            return Err(DynvarError::BadTuple);
        }
        let me = if op == Op::Lookup {
            None
        } else {
            Some(self.cpu(cpu)?)
        };
        if let Op::Alloc(vw) = op {
            if HEADER_WORDS + vw + keys.words() > self.layout.chunk_words() {
                if let Some(d) = me {
                    d.drops_size.fetch_add(1, Relaxed);
                }
                self.count_var_drop(var);
                return Err(DynvarError::TooLarge);
            }
        }
        let hash = keys.hash();
        // PANIC: `bucket_of` is below `nchunks`, the number of buckets (type invariant).
        let bucket = &self.buckets[self.bucket_of(hash)];
        let mut locked = 0;
        if op == Op::Delete {
            locked = lock_bucket(bucket);
        }
        let mut restarts = 0u32;
        'top: loop {
            restarts += 1;
            if restarts > MAX_RESTARTS {
                if op == Op::Delete {
                    bucket.lock.store(locked.wrapping_add(1), Release);
                }
                if let Some(d) = me {
                    d.contended.fetch_add(1, Relaxed);
                }
                return Err(DynvarError::Contended);
            }
            let seq = bucket.lock.load(Acquire);
            let start = bucket.head.load(Acquire);
            let mut prev = NIL;
            let mut cur = start;
            let mut steps = 0u32;
            while cur != SINK {
                if !self.is_chunk(cur) || steps > self.layout.nchunks {
                    // Followed a deleted chunk off its chain (into a dirty list ending in
                    // NIL), or a chain changing faster than we walk it: start over.
                    spin_loop();
                    continue 'top;
                }
                steps += 1;
                let h = self.w(cur, W_HASH).0.load(Acquire);
                if h == HASH_FREE {
                    // A deleted chunk: the chain changed under us.
                    spin_loop();
                    continue 'top;
                }
                if h == hash && self.keys_match(cur, keys) {
                    if op != Op::Delete {
                        return Ok(Some(cur));
                    }
                    if !self.unlink(bucket, prev, cur) {
                        // An insertion swung the head: walk again (still locked).
                        spin_loop();
                        continue 'top;
                    }
                    self.retire(me, cur);
                    bucket.lock.store(locked.wrapping_add(1), Release);
                    return Ok(Some(cur));
                }
                prev = cur;
                cur = self.w(cur, W_NEXT).0.load(Acquire) as u32;
            }
            match op {
                Op::Lookup => {
                    // Belt and braces (the sink and the free marker already catch a walk
                    // that a deletion disturbed): a deletion that completed during the walk
                    // advanced the sequence, so walk again before reporting absence.
                    if bucket.lock.load(Acquire) != seq {
                        spin_loop();
                        continue 'top;
                    }
                    return Ok(None);
                }
                Op::Delete => {
                    bucket.lock.store(locked.wrapping_add(1), Release);
                    return Ok(None);
                }
                Op::Alloc(vw) => {
                    let Some(d) = me else {
                        return Err(DynvarError::BadCpu);
                    };
                    let c = self.alloc_chunk(cpu, var)?;
                    self.fill(c, keys, vw);
                    self.w(c, W_NEXT).0.store(u64::from(start), Relaxed);
                    self.w(c, W_HASH).0.store(hash, Release);
                    if bucket
                        .head
                        .compare_exchange(start, c, AcqRel, Acquire)
                        .is_ok()
                    {
                        // The high-water mark is sampled, not kept exactly (that would take a
                        // shared counter per allocation): at a CPU's first and every 64th
                        // allocation, and at every cleaner pass, drop and status query.
                        if d.allocs.fetch_add(1, Relaxed) % HIGH_WATER_SAMPLE == 0 {
                            self.sample_high_water();
                        }
                        return Ok(Some(c));
                    }
                    // Lost the race with another insertion or a deletion: the chunk
                    // goes to the dirty list, not the free list, so that no allocator that
                    // has seen it on a free list can be fooled; then look up again.
                    self.w(c, W_HASH).0.store(HASH_FREE, Release);
                    self.push_dirty(d, c);
                    d.races.fetch_add(1, Relaxed);
                    spin_loop();
                    continue 'top;
                }
            }
        }
    }

    /// Unlinks chunk `cur`, which follows `prev` on `bucket`'s chain (`NIL`: heads it), under
    /// the bucket's lock; false when an insertion swung the head since.
    #[inline(always)]
    fn unlink(&self, bucket: &Bucket, prev: u32, cur: u32) -> bool {
        let next = self.w(cur, W_NEXT).0.load(Acquire) as u32;
        if prev == NIL {
            return bucket
                .head
                .compare_exchange(cur, next, AcqRel, Acquire)
                .is_ok();
        }
        // Deletions are serialised by the lock; insertions only swing the head, so a plain
        // store unlinks from the middle.
        self.w(prev, W_NEXT).0.store(u64::from(next), Release);
        true
    }

    /// Marks an unlinked chunk free of any chain and puts it on `me`'s dirty list.
    #[inline(always)]
    fn retire(&self, me: Option<&CpuState>, c: u32) {
        self.w(c, W_HASH).0.store(HASH_FREE, Release);
        if let Some(d) = me {
            self.push_dirty(d, c);
            d.frees.fetch_add(1, Relaxed);
        }
    }

    /// The words of chunk `c` after its header; `c` must be a chunk index (as for `w`).
    #[inline(always)]
    fn body(&self, c: u32) -> &'a [Word] {
        let cw = self.layout.chunk_words();
        let base = c as usize * cw;
        // PANIC: `chunks` holds `nchunks * chunk_words` words and `c < nchunks` (as for
        // `w`); `HEADER_WORDS < chunk_words` (`MIN_CHUNK_BYTES`).
        &self.chunks[base + HEADER_WORDS..base + cw]
    }

    /// Whether live chunk `c` holds `keys`.
    #[inline(always)]
    fn keys_match<T: Tuple + ?Sized>(&self, c: u32, keys: &T) -> bool {
        keys.held(self.w(c, W_META).get(), self.body(c))
    }

    /// Writes key and zeroed value into a chunk this CPU owns (not yet published).
    /// `HEADER_WORDS + vw + keys.words() <= chunk_words` (the caller checks it).
    #[inline(always)]
    fn fill<T: Tuple + ?Sized>(&self, c: u32, keys: &T, vw: usize) {
        let meta = keys.fill(self.body(c), vw);
        self.w(c, W_META).set(meta);
    }
}

/// Takes a bucket's deletion lock; returns the (odd) locked value.
fn lock_bucket(b: &Bucket) -> u32 {
    loop {
        let v = b.lock.load(Acquire);
        if v & 1 == 0
            && b.lock
                .compare_exchange(v, v.wrapping_add(1), AcqRel, Acquire)
                .is_ok()
        {
            return v.wrapping_add(1);
        }
        spin_loop();
    }
}
