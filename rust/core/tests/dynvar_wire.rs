//! What the kernel wiring relies on from the pure engine: the chunk size of a program from its
//! variable dictionary, the ABI's state numbers, and the shared key type.

use oxtrace_core::abi;
use oxtrace_core::action::{Key, KeyLayout, Scope, VarInfo};
use oxtrace_core::dynvar::*;

fn var(scope: Scope, keys: KeyLayout) -> VarInfo {
    VarInfo {
        scope,
        keys,
        string: false,
    }
}

#[test]
fn globals_need_no_dynamic_memory() {
    assert_eq!(
        var_chunk_bytes(var(Scope::Global, KeyLayout::NONE), 256),
        None
    );
    let only_globals = [var(Scope::Global, KeyLayout::NONE); 3];
    assert_eq!(program_chunk_bytes(only_globals, 256), None);
    assert_eq!(program_chunk_bytes([], 256), None);
}

#[test]
fn thread_local_is_tid_and_var_id() {
    let b = var_chunk_bytes(var(Scope::Thread, KeyLayout::NONE), 256).unwrap();
    assert_eq!(
        b,
        chunk_bytes_for(&[KeyShape::Int, KeyShape::Int], VALUE_BYTES)
    );
    // header 3 + value 1 + two integer keys of 2 words.
    assert_eq!(b, (3 + 1 + 4) * 8);
}

#[test]
fn assoc_string_keys_are_bounded_by_strsize() {
    // a[execname, pid]: (var id, str, int)
    let k = KeyLayout::new(2, 0b01);
    let b = var_chunk_bytes(var(Scope::Assoc, k), 256).unwrap();
    let want = chunk_bytes_for(
        &[KeyShape::Int, KeyShape::Str { max_len: 256 }, KeyShape::Int],
        VALUE_BYTES,
    );
    assert_eq!(b, want);
    assert_eq!(b, (3 + 1 + 2 + (1 + 32) + 2) * 8);
    // A larger strsize makes a larger chunk.
    assert!(var_chunk_bytes(var(Scope::Assoc, k), 1024).unwrap() > b);
}

#[test]
fn program_takes_the_largest_variable() {
    let vars = [
        var(Scope::Global, KeyLayout::NONE),
        var(Scope::Thread, KeyLayout::NONE),
        var(Scope::Assoc, KeyLayout::new(1, 0)),
        var(Scope::Assoc, KeyLayout::new(3, 0b100)),
    ];
    let max = vars
        .iter()
        .filter_map(|&v| var_chunk_bytes(v, 64))
        .max()
        .unwrap();
    assert_eq!(program_chunk_bytes(vars, 64), Some(max));
    assert_eq!(max, var_chunk_bytes(vars[3], 64).unwrap());
}

#[test]
fn invalid_layouts_are_refused() {
    // A mask bit beyond the count.
    assert_eq!(
        var_chunk_bytes(var(Scope::Assoc, KeyLayout(1 | 0b10 << 8)), 64),
        None
    );
}

#[test]
fn every_access_fits_the_program_chunk() {
    // The tuple the kernel builds for the largest string key must fit the computed chunk.
    let strsize = 40;
    let k = KeyLayout::new(2, 0b10);
    let chunk = program_chunk_bytes([var(Scope::Assoc, k)], strsize).unwrap();
    let layout = Layout::new(64 * (chunk + BUCKET_BYTES), 2, chunk, 1).unwrap();
    let mem = dynvar_mem(&layout);
    let d = mem.dstate(layout);
    d.reset();
    let s = [b'x'; 40];
    let keys = [array_key(0), Key::Int(7), Key::Str(&s)];
    assert!(d.store(0, 0, &keys, 5).is_ok());
    assert_eq!(d.load(&keys), Ok(5));
    // One byte longer than strsize would not fit: the bound is what makes chunks fixed.
    let s2 = [b'x'; 48];
    let long = [array_key(0), Key::Int(7), Key::Str(&s2)];
    assert_eq!(d.store(1, 0, &long, 5), Err(DynvarError::TooLarge));
}

#[test]
fn abi_state_numbers_match_the_engine() {
    assert_eq!(abi::DSTATE_FREE, DstateState::Free as u32);
    assert_eq!(abi::DSTATE_CLEAN, DstateState::Clean as u32);
    assert_eq!(abi::DSTATE_RINSING, DstateState::Rinsing as u32);
    assert_eq!(abi::DSTATE_DIRTY, DstateState::Dirty as u32);
    assert_eq!(abi::DSTATE_EMPTY, DstateState::Empty as u32);
}

/// Owned regions for one layout.
struct Mem {
    header: Header,
    cpus: Vec<CpuState>,
    buckets: Vec<Bucket>,
    chunks: Vec<Word>,
    var_drops: Vec<Word>,
}

impl Mem {
    fn dstate(&self, layout: Layout) -> Dstate<'_> {
        Dstate::new(
            layout,
            &self.header,
            &self.cpus,
            &self.buckets,
            &self.chunks,
            &self.var_drops,
        )
        .unwrap()
    }
}

fn dynvar_mem(l: &Layout) -> Mem {
    Mem {
        header: Header::new(),
        cpus: (0..l.ncpus()).map(|_| CpuState::new()).collect(),
        buckets: (0..l.nchunks()).map(|_| Bucket::new()).collect(),
        chunks: (0..l.chunk_word_count()).map(|_| Word::new()).collect(),
        var_drops: (0..l.nvars()).map(|_| Word::new()).collect(),
    }
}

#[test]
fn string_valued_variables_hold_strsize_bytes() {
    let int = var(Scope::Assoc, KeyLayout::new(1, 0));
    let s = VarInfo {
        string: true,
        ..int
    };
    let a = var_chunk_bytes(int, 256).unwrap();
    let b = var_chunk_bytes(s, 256).unwrap();
    assert_eq!(b - a, 256 - 8);
    assert_eq!(string_value_bytes(5), 8);
    assert_eq!(string_value_bytes(9), 16);
}

#[path = "dynvar_util/mod.rs"]
mod dynvar_util;

#[test]
fn string_values_store_load_and_delete() {
    let shapes = [KeyShape::Int, KeyShape::Int];
    let chunk = chunk_bytes_for(&shapes, string_value_bytes(12));
    let l = Layout::new(4 * (chunk + BUCKET_BYTES), 1, chunk, 4).unwrap();
    let m = dynvar_util::Mem::new(l);
    let ds = m.ds();
    let k = [Key::Int(2), Key::Int(7)];
    let mut out = [0u8; 12];
    assert_eq!(ds.load_bytes(&k, &mut out), Ok(0));
    ds.store_bytes(0, 2, &k, b"hello", string_value_bytes(12))
        .unwrap();
    assert_eq!(ds.load_bytes(&k, &mut out), Ok(5));
    assert_eq!(&out[..5], b"hello");
    // A longer value is truncated to the value space; a shorter one leaves no old bytes.
    ds.store_bytes(0, 2, &k, b"0123456789abcdefgh", string_value_bytes(12))
        .unwrap();
    let mut big = [0u8; 32];
    assert_eq!(ds.load_bytes(&k, &mut big), Ok(16));
    ds.store_bytes(0, 2, &k, b"ab", string_value_bytes(12))
        .unwrap();
    assert_eq!(ds.load_bytes(&k, &mut big), Ok(2));
    // The empty string deletes.
    ds.store_bytes(0, 2, &k, b"", string_value_bytes(12))
        .unwrap();
    assert!(ds.lookup(&k).unwrap().is_none());
}
