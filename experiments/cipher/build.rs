//! Compiles the one SQLite this build measures: SQLCipher 4 with OpenSSL's libcrypto
//! (as rusqlite's `bundled-sqlcipher` builds it for sqlvault) or SQLite3 Multiple Ciphers.

fn main() {
    let mut b = cc::Build::new();
    b.opt_level(3)
        .warnings(false)
        .define("SQLITE_THREADSAFE", "1")
        .define("SQLITE_TEMP_STORE", "2")
        .define("SQLITE_DEFAULT_WAL_SYNCHRONOUS", "1")
        .define("SQLITE_OMIT_LOAD_EXTENSION", None);
    #[cfg(feature = "sqlcipher")]
    {
        let dir = sqlcipher_src::source_dir();
        b.file(dir.join(sqlcipher_src::SOURCE_FILE))
            .define("SQLITE_HAS_CODEC", None)
            .define("SQLCIPHER_CRYPTO_OPENSSL", None)
            .define("SQLITE_EXTRA_INIT", "sqlcipher_extra_init")
            .define("SQLITE_EXTRA_SHUTDOWN", "sqlcipher_extra_shutdown");
        b.compile("sqlite_under_test");
        println!("cargo:rustc-link-lib=crypto");
    }
    #[cfg(feature = "mc")]
    {
        let dir = sqlite3mc_src::source_dir();
        b.file(dir.join(sqlite3mc_src::SOURCE_FILE)).flag_if_supported("-maes").flag_if_supported("-msse4.2");
        b.compile("sqlite_under_test");
    }
    #[cfg(not(any(feature = "sqlcipher", feature = "mc")))]
    panic!("build with --features sqlcipher or --features mc");
}
