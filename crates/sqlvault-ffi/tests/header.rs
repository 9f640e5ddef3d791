//! `include/sqlvault.h` is what cbindgen makes of `src/capi/` with `cbindgen.toml`: this
//! test regenerates it and fails if the committed header differs, so the header cannot
//! drift from the exported functions. After changing the C API, rewrite it with
//! `SQLVAULT_BLESS_HEADER=1 cargo test -p sqlvault-ffi --test header`.

use std::path::Path;

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).unwrap();
    // cbindgen follows the `mod` items of mod.rs to the other files.
    let builder = cbindgen::Builder::new().with_config(config).with_src(crate_dir.join("src/capi/mod.rs"));
    let mut generated = Vec::new();
    builder.generate().expect("cbindgen reads src/capi").write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();

    let header = crate_dir.join("include/sqlvault.h");
    if std::env::var_os("SQLVAULT_BLESS_HEADER").is_some() {
        std::fs::write(&header, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&header).unwrap_or_default();
    if committed != generated {
        let line = committed.lines().zip(generated.lines()).position(|(a, b)| a != b);
        panic!(
            "include/sqlvault.h is stale (first difference at line {}): regenerate it with \
             SQLVAULT_BLESS_HEADER=1 cargo test -p sqlvault-ffi --test header",
            line.map_or_else(|| "the end".into(), |l| (l + 1).to_string())
        );
    }
    // Every function is documented in the header.
    let lines: Vec<&str> = generated.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let declaration = !l.starts_with([' ', '/', '#', '}']) && l.contains(" sqlvault_") && l.contains('(');
        if declaration {
            assert!(i > 0 && lines[i - 1].starts_with("//"), "undocumented in the header: {l}");
        }
    }
}
