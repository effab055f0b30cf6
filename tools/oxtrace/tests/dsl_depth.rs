//! Deep and long expressions: refused past `MAX_DEPTH` with `line:column`, compiled up to
//! it, and never a stack overflow in the parser, the code generator or the drop of the tree.

use oxtrace::dsl::syntax::parser::MAX_DEPTH;
use oxtrace::dsl::{compile, CompileError, CompileOptions};

/// Compile on a thread with a 32 MiB stack.  The tool compiles on its main thread (8 MiB);
/// in a release build it survives about ten times `MAX_DEPTH` levels in 8 MiB, but the
/// frames of this unoptimised build are 6 to 17 times larger, so 32 MiB here is the
/// stricter test of the same margin.
fn run(src: &str) -> Result<(), CompileError> {
    let src = src.to_string();
    std::thread::Builder::new()
        .stack_size(32 << 20)
        .spawn(move || compile(&src, "t.d", &CompileOptions::default()).map(|_| ()))
        .unwrap()
        .join()
        .unwrap()
}

/// `BEGIN { x = <e>; }` must fail at column `col` of line 1 with the depth message.
fn too_deep(e: &str, col: usize) {
    let src = format!("BEGIN {{ x = {e}; }}");
    match run(&src) {
        Ok(()) => panic!("compiled: {}...", &src[..80]),
        Err(err) => {
            assert_eq!(
                err.msg,
                format!("expression nested more than {MAX_DEPTH} levels deep")
            );
            assert_eq!(err.position(), format!("1:{col}"), "{}", err.msg);
        }
    }
}

/// `BEGIN { x = <e>; }` must compile, or fail with an error that is not about depth.
fn fits(e: &str) {
    let src = format!("BEGIN {{ x = {e}; }}");
    if let Err(err) = run(&src) {
        assert!(!err.msg.contains("levels deep"), "{err}");
    }
}

// `x = ` is the first level; the expression starts at column 13.
const START: usize = 13;

#[test]
fn nested_parentheses() {
    let n = MAX_DEPTH - 1;
    run(&format!(
        "BEGIN {{ x = {}1{}; }}",
        "(".repeat(n),
        ")".repeat(n)
    ))
    .unwrap();
    // The parenthesis one past the limit is refused where its contents start.
    for n in [MAX_DEPTH, 5_000, 50_000] {
        too_deep(
            &format!("{}1{}", "(".repeat(n), ")".repeat(n)),
            START + MAX_DEPTH,
        );
    }
    // Unclosed: the same error, not a crash at the end of the input.
    too_deep(&"(".repeat(100_000), START + MAX_DEPTH);
}

#[test]
fn unary_operators() {
    for op in ["- ", "!", "~", "+ "] {
        run(&format!("BEGIN {{ x = {}1; }}", op.repeat(MAX_DEPTH - 1))).unwrap();
        let e = format!("{}1", op.repeat(30_000));
        too_deep(&e, START + op.len() * MAX_DEPTH);
    }
    fits(&format!("{}1", "(int)".repeat(MAX_DEPTH - 1)));
    too_deep(
        &format!("{}1", "(int)".repeat(30_000)),
        START + 5 * MAX_DEPTH,
    );
}

#[test]
fn operator_chains() {
    let chain = |n: usize, op: &str| vec!["1"; n].join(op);
    // MAX_DEPTH - 1 operators fit after `x = `.
    run(&format!("BEGIN {{ x = {}; }}", chain(MAX_DEPTH, " + "))).unwrap();
    run(&format!(
        "BEGIN /{}/ {{ exit(0); }}",
        chain(MAX_DEPTH, " || pid == ")
    ))
    .unwrap();
    for op in [" + ", " * ", " || ", " & ", " < "] {
        // The operator one past the limit is refused (each operator starts after a space).
        too_deep(
            &chain(20_000, op),
            START + (1 + op.len()) * (MAX_DEPTH - 1) + 2,
        );
    }
}

#[test]
fn other_nestings() {
    let n = MAX_DEPTH - 1;
    // Right-nested assignments, ?: and subscripts, calls and casts to deep pointers.
    fits(&format!("{}1", "y = ".repeat(n - 1)));
    too_deep(
        &format!("{}1", "y = ".repeat(30_000)),
        START + 4 * MAX_DEPTH,
    );
    fits(&format!("{}1", "1 ? 2 : ".repeat(n)));
    assert!(run(&format!("BEGIN {{ x = {}1; }}", "1 ? 2 : ".repeat(30_000))).is_err());
    assert!(run(&format!("BEGIN {{ x = {}1; }}", "1 ? ".repeat(30_000))).is_err());
    run(&format!(
        "BEGIN {{ this->s = {}\"a\"{}; }}",
        "stringof(".repeat(n),
        ")".repeat(n)
    ))
    .unwrap();
    assert!(run(&format!("BEGIN {{ x = {}1; }}", "strlen(".repeat(30_000))).is_err());
    assert!(run(&format!("BEGIN {{ x = {}1; }}", "a[".repeat(30_000))).is_err());
    run(&format!(
        "BEGIN {{ x = ((int {})0){}; }}",
        "*".repeat(n - 2),
        "[0]".repeat(n - 2)
    ))
    .unwrap();
    assert!(run(&format!(
        "BEGIN {{ x = ((int *)0){}; }}",
        "[0]".repeat(30_000)
    ))
    .is_err());
    run(&format!("BEGIN {{ x = (int {})0; }}", "*".repeat(n - 1))).unwrap();
    assert!(run(&format!("BEGIN {{ x = (int {})0; }}", "*".repeat(30_000))).is_err());
    // In a predicate and in aggregation keys too.
    assert!(run(&format!("BEGIN /{}1/ {{ }}", "(".repeat(30_000))).is_err());
    assert!(run(&format!(
        "BEGIN {{ @[{}1] = count(); }}",
        "- ".repeat(30_000)
    ))
    .is_err());
}

/// The deepest trees the limit allows, in the shapes that recurse most in the code
/// generator, compile (or fail cleanly) on a test thread's small stack.
#[test]
fn worst_cases_at_the_limit() {
    let n = MAX_DEPTH - 1;
    // Each level a chain operator whose right side is a parenthesis: tree depth 2n.
    fits(&format!("{}1{}", "1 + (".repeat(n / 2), ")".repeat(n / 2)));
    fits(&format!("{}1{}", "1 || (".repeat(n / 2), ")".repeat(n / 2)));
    fits(&format!("{}1", "- (int)".repeat(n / 2)));
    fits(&format!(
        "((int {})0){}",
        "*".repeat(n / 2),
        "[- 0]".repeat(n / 2)
    ));
    fits(&format!(
        "{}1{}",
        "(1 ? (".repeat(n / 3),
        ") : 0)".repeat(n / 3)
    ));
}
