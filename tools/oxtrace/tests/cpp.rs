//! `-C`: the program through the C preprocessor (needs `cpp`, as on the host; the guest has
//! none, and the tool refuses -C there naming it).

mod support;
use support::have_cpp;

use oxtrace::dsl::cpp::{preprocess, CppArg};
use oxtrace::dsl::{compile, CompileOptions};

#[test]
fn defines_undefs_and_includes_reach_the_program() {
    if !have_cpp() {
        eprintln!("skip: no cpp");
        return;
    }
    let dir = std::env::temp_dir().join(format!("oxt-cpp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lim.h"), "#define LIMIT 42\n").unwrap();
    let src = "#include \"lim.h\"\n#define TWICE(x) ((x) * 2)\nBEGIN { trace(TWICE(LIMIT) + N); }\n#ifdef GONE\nsyntax error\n#endif\n";
    let args = [
        CppArg::Include(dir.display().to_string()),
        CppArg::Define("N=7".into()),
        CppArg::Define("GONE".into()),
        CppArg::Undef("GONE".into()),
    ];
    let out = preprocess(src, "-e", &args).unwrap();
    assert!(out.contains("trace(((42) * 2) + 7)"), "{out}");
    assert!(!out.contains("syntax error"), "{out}");
    // Words cpp would predefine on Linux (`linux`, `unix`) stay D words.
    let out = preprocess("BEGIN { linux = 1; }\n", "-e", &[]).unwrap();
    assert!(out.contains("linux = 1"), "{out}");
    compile(&out, "-e", &CompileOptions::default()).unwrap();
    // The system's headers work as DTrace's preprocessor sees them, and its names.
    let src = "#include <endian.h>\n#if __BYTE_ORDER == __LITTLE_ENDIAN && defined(__linux) && defined(__SUNW_D) && !defined(__GNUC__)\nBEGIN { little = 1; }\n#endif\n";
    let out = preprocess(src, "-e", &[]).unwrap();
    assert!(
        out.contains("little = 1") == cfg!(target_endian = "little"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lines_keep_their_numbers_in_compile_errors() {
    if !have_cpp() {
        return;
    }
    let src = "#define X 1\n\n\n\nBEGIN { x = ; }\n";
    let out = preprocess(src, "prog.d", &[]).unwrap();
    let e = compile(&out, "prog.d", &CompileOptions::default()).unwrap_err();
    assert!(e.to_string().contains("prog.d:5:"), "{e}");
}

#[test]
fn cpp_errors_name_the_program_and_line() {
    if !have_cpp() {
        return;
    }
    let e = preprocess("BEGIN { }\n#error no way\n", "prog.d", &[]).unwrap_err();
    assert!(e.contains("prog.d:2:"), "{e}");
    assert!(e.contains("no way"), "{e}");
    let e = preprocess("#include \"nope.h\"\n", "-e", &[]).unwrap_err();
    assert!(e.contains("-e:1:") && e.contains("nope.h"), "{e}");
}
