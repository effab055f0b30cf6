//! The fire path's instructions per firing, on the host: the bench's D programs compiled
//! by the tool, their clauses verified and predecoded as LOAD does, then run by
//! `probe::run_clauses` over an environment that does what the kernel's does for them with
//! the same core code (an aggregation update, a principal-buffer record, a `self->` variable
//! in a `Dstate`). Timing under TCG is what a guest's instructions cost, and this shared
//! machine's load moves wall-clock figures by more than a change to the fire path does, so
//! this counts instead: run it under `valgrind --tool=callgrind` twice with different
//! firing counts and divide the difference (`scripts/firebench.sh` does that). It prints
//! nothing but a checksum, so that nothing is optimised away; it never fails on a figure.
//!
//! ```text
//! oxt-firebench PAIR FIRINGS      (PAIR: empty count sum trace hist ten)
//! ```

use oxtrace::dsl::{compile, CompileOptions};
use oxtrace_core::action::Scope;
use oxtrace_core::action::{
    Builtin, DInsn, Dict, Env, Fault, Key, Record, Vm, VmParams, VmState, AGG_NARGS,
};
use oxtrace_core::agg::{self, AggBuffer, AggFunc, AggWriter, IntKey};
use oxtrace_core::buffer;
use oxtrace_core::dynvar::{
    self, Bucket, CpuState, CrossCall, Dstate, Header, IntPair, Layout, Word,
};
use oxtrace_core::load;
use oxtrace_core::probe::{self, ArgSource, ClauseEnv};
use oxtrace_core::program::{Image, ProbeKind, VerifiedClause};

/// The bench's programs (`scripts/guest/bench-run.sh`).
fn program(pair: &str) -> String {
    match pair {
        "empty" => "fbt::ksys_read:entry /0/ { }".into(),
        "count" => "fbt::ksys_read:entry { @[pid] = count(); }".into(),
        "sum" => "fbt::ksys_read:entry { @s = sum(arg0); }".into(),
        "trace" => "fbt::ksys_read:entry { trace(pid); }".into(),
        "hist" => "fbt::ksys_read:entry { self->ts = timestamp; }
fbt::ksys_read:return /self->ts/ { @ = quantize(timestamp - self->ts); self->ts = 0; }"
            .into(),
        "ten" => (0..10)
            .map(|i| format!("fbt::ksys_read:entry {{ @c{i} = count(); }}\n"))
            .collect(),
        _ => {
            eprintln!("oxt-firebench: no pair {pair}");
            std::process::exit(2);
        }
    }
}

/// No CPU is ever in probe context between two firings here.
struct Sequential;

impl CrossCall for Sequential {
    fn sync_all_cpus(&self) {}
}

/// What the kernel's `KernelEnv` reaches for these programs, with the same core code.
struct BenchEnv<'a> {
    kind: ProbeKind,
    ts: u64,
    agg: &'a mut [u64],
    funcs: &'a [AggFunc],
    pbuf: &'a mut [u8],
    pbuf_off: usize,
    dyn_: &'a Dstate<'a>,
    /// The chunk the last lookup found, as `glue::dynmem::DynRoom` keeps it.
    found: Option<u32>,
    scopes: &'a [Scope],
    sum: u64,
}

impl<'a> BenchEnv<'a> {
    /// The CPU's aggregation buffer and aggregation `id`'s function, as `KernelEnv` has them.
    fn agg_buf(&mut self, id: u32) -> Option<(AggWriter<'_>, &'a AggFunc)> {
        let func = self.funcs.get(id as usize)?;
        Some((AggWriter::new(self.agg).ok()?, func))
    }

    /// The `self->` tuple, as `glue::dynmem` builds it (no allocation).
    fn tuple(&self, var: u32, keys: &[Key<'_>]) -> Option<IntPair> {
        match (self.scopes.get(var as usize)?, keys) {
            (Scope::Thread, [Key::Int(tid)]) => Some(IntPair::thread(*tid, var)),
            _ => None,
        }
    }
}

impl ClauseEnv for BenchEnv<'_> {
    fn enter_clause(&mut self, _clause: u32) {}
    fn fault(&mut self, _clause: u32, f: Fault) {
        panic!("fault {f:?}");
    }
    fn error_args(&mut self) -> &mut [u64; 6] {
        unreachable!()
    }
    fn enter_error(&mut self, _desc: u32) -> bool {
        false
    }
    fn leave_error(&mut self) {}
}

// The calls that `KernelEnv` keeps out of line (`#[inline(never)]`, for the probe's stack)
// are out of line here too: the interpreter's code around them is then the module's.
impl Env for BenchEnv<'_> {
    fn builtin(&mut self, b: Builtin) -> u64 {
        if let Some(src) = probe::arg_source(self.kind, b) {
            return match src {
                ArgSource::Arg(n) => n as u64 + 1,
                _ => 0,
            };
        }
        match b {
            Builtin::Pid | Builtin::Tid => 4242,
            Builtin::Timestamp => self.ts,
            _ => 0,
        }
    }
    fn builtin_str(&mut self, _b: Builtin, _out: &mut [u8]) -> usize {
        0
    }
    fn read_kernel(&mut self, _addr: u64, _out: &mut [u8]) -> bool {
        false
    }
    fn global_load(&mut self, _id: u32) -> u64 {
        0
    }
    fn global_store(&mut self, _id: u32, _value: u64) {}
    #[inline(never)]
    fn dynvar_load(&mut self, var: u32, keys: &[Key<'_>]) -> u64 {
        let Some(t) = self.tuple(var, keys) else {
            return 0;
        };
        self.dyn_.load_noting(&t, &mut self.found).unwrap_or(0)
    }
    #[inline(never)]
    fn dynvar_store(&mut self, var: u32, keys: &[Key<'_>], value: u64) -> bool {
        let Some(t) = self.tuple(var, keys) else {
            return false;
        };
        let ok = self
            .dyn_
            .store_noted(0, var, &t, value, &mut self.found)
            .is_ok();
        if self.dyn_.wants_clean(0) {
            let _ = self.dyn_.clean(&Sequential);
        }
        ok
    }
    fn dynvar_load_str(&mut self, _var: u32, _keys: &[Key<'_>], _out: &mut [u8]) -> usize {
        0
    }
    fn dynvar_store_str(&mut self, _var: u32, _keys: &[Key<'_>], _s: &[u8]) -> bool {
        false
    }
    #[inline(never)]
    fn agg_update(&mut self, id: u32, keys: &[Key<'_>], args: &[u64; AGG_NARGS]) -> bool {
        self.agg_buf(id).is_some_and(|(mut buf, func)| {
            buf.apply(id, func, keys, args[0] as i64, args[1] as i64)
                .is_ok()
        })
    }
    #[inline(never)]
    fn agg_update_ints(&mut self, id: u32, key: &IntKey, args: &[u64; AGG_NARGS]) -> bool {
        self.agg_buf(id).is_some_and(|(mut buf, func)| {
            buf.apply_ints(id, func, key, args[0] as i64, args[1] as i64)
                .is_ok()
        })
    }
    #[inline(never)]
    fn emit(&mut self, rec: &Record<'_>) -> bool {
        if self.pbuf_off + 64 > self.pbuf.len() {
            self.pbuf_off = 0;
        }
        let kind = buffer::with_clause(rec.kind as u32, 0);
        let ok = buffer::write(
            self.pbuf,
            &mut self.pbuf_off,
            kind,
            0,
            rec.id,
            self.ts,
            rec.data,
        );
        self.sum = self.sum.wrapping_add(self.pbuf_off as u64);
        ok
    }
    fn ptwrite(&mut self, _value: u64) -> bool {
        false
    }
    fn progenyof(&mut self, _pid: u64) -> bool {
        false
    }
    fn speculation(&mut self) -> u64 {
        0
    }
    fn emit_spec(&mut self, _id: u64, _rec: &Record<'_>) -> bool {
        false
    }
    fn spec_end(&mut self, _id: u64, _commit: bool) -> bool {
        true
    }
    fn raise(&mut self, _sig: u64) -> bool {
        false
    }
    fn chill(&mut self, _ns: u64) -> bool {
        false
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(pair), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<u64>().ok()))
    else {
        eprintln!("usage: oxt-firebench PAIR FIRINGS");
        std::process::exit(2);
    };
    let src = program(pair);
    let c = compile(&src, "-e", &CompileOptions::default()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let image = Image::parse(&c.image).expect("image");
    if std::env::var_os("FIREBENCH_DIS").is_some() {
        for ci in 0..image.clause_count() {
            let v = image
                .verify_clause(ci, u64::MAX as usize)
                .expect("verified");
            for p in v.pred.iter().chain(core::iter::once(&v.act)) {
                let code = p.code();
                let words: Vec<u64> = (0..code.len()).filter_map(|i| code.word(i)).collect();
                eprintln!("clause {ci}:\n{}", oxtrace::dsl::disassemble(&words));
            }
        }
    }
    // LOAD's checks and predecoding (`glue::image`).
    let mut clauses: Vec<VerifiedClause<'_>> = Vec::new();
    let plan = load::check_load(&image, |v| {
        clauses.push(v);
        Ok::<(), oxtrace_core::diag::Refusal>(())
    })
    .expect("load");
    let total: usize = clauses
        .iter()
        .map(|c| c.pred.map_or(0, |p| p.code().len()) + c.act.code().len())
        .sum();
    let dec: &'static mut [DInsn] = Box::leak(vec![DInsn::NOP; total].into_boxed_slice());
    let mut rest = dec;
    for c in clauses.iter_mut() {
        for v in Iterator::chain(c.pred.iter_mut(), core::iter::once(&mut c.act)) {
            let (here, tail) = core::mem::take(&mut rest).split_at_mut(v.code().len());
            rest = tail;
            *v = v.decode_into(&image, here).unwrap_or(*v);
        }
    }
    let funcs: Vec<AggFunc> = (0..image.agg_count() as u32)
        .map(|id| {
            let a = image.agg_desc(id).expect("agg");
            agg::check_params(a.func, &a.params).expect("params")
        })
        .collect();
    let mut aggmem = vec![0u64; image.options().aggsize as usize / 8];
    AggBuffer::format(&mut aggmem).expect("agg buffer");
    let mut pbuf = vec![0u8; 1 << 20];

    // One CPU's dynamic memory, as `glue::dynmem` lays it out.
    let nvars = image.var_count();
    let scopes: Vec<Scope> = (0..nvars as u32)
        .map(|id| image.var(id).expect("var").scope)
        .collect();
    let vars = (0..nvars as u32).filter_map(|id| image.var(id));
    let chunk = dynvar::program_chunk_bytes(vars, image.options().strsize as usize).unwrap_or(64);
    let layout = Layout::new(1 << 20, 1, chunk, nvars.max(1) as u32).expect("layout");
    let header = Header::new();
    let cpus: Vec<CpuState> = (0..layout.ncpus()).map(|_| CpuState::new()).collect();
    let buckets: Vec<Bucket> = (0..layout.nchunks()).map(|_| Bucket::new()).collect();
    let chunks: Vec<Word> = (0..layout.chunk_word_count())
        .map(|_| Word::new())
        .collect();
    let drops: Vec<Word> = (0..layout.nvars()).map(|_| Word::new()).collect();
    let ds = Dstate::new(layout, &header, &cpus, &buckets, &chunks, &drops).expect("dstate");
    ds.reset();

    let mut st = Box::new(VmState::new());
    let mut scratch = vec![0u8; plan.scratch];
    let mut env = BenchEnv {
        kind: ProbeKind::FbtEntry,
        ts: 1,
        agg: &mut aggmem,
        funcs: &funcs,
        pbuf: &mut pbuf,
        pbuf_off: 0,
        dyn_: &ds,
        found: None,
        scopes: &scopes,
        sum: 0,
    };
    // The session's per-description clause lists, built at LOAD.
    let descs: Vec<(Vec<u32>, ProbeKind)> = (0..image.probe_count())
        .filter_map(|pi| {
            let p = image.probe(pi)?;
            Some((probe::clauses_of(&image, pi as u32).collect(), p.kind))
        })
        .collect();
    // Checked at LOAD, as the session does.
    let params = VmParams::new(image.nlocals(), image.strsize()).expect("vm params");
    for i in 0..n {
        for (order, kind) in &descs {
            env.kind = *kind;
            env.ts = 1000 + i * 37;
            let Ok(mut vm) = Vm::with(&mut st, &mut scratch, &params) else {
                panic!("vm");
            };
            probe::run_clauses(&mut vm, &image, &clauses, order.iter().copied(), &mut env);
        }
    }
    let b = AggBuffer::attach(env.agg).expect("agg");
    println!("{} {}", b.len(), env.sum);
}
