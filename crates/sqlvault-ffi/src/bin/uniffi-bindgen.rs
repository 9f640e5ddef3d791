//! `uniffi-bindgen`, built at the uniffi version the library uses: generates the Python
//! and Kotlin code from the compiled library (`generate --library <lib> --language ...`).

fn main() {
    uniffi::uniffi_bindgen_main()
}
