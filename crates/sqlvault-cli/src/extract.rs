//! `put --extract-tags`: basic metadata of a host file as tags.
//!
//! * `size` (bytes) and `mtime` (seconds since the epoch) from the host's metadata;
//! * `mime` from the content's magic bytes (crate `infer`, first 8 KiB), when known;
//! * for JPEG files, EXIF (crate `kamadak-exif`, which reads only the segments before
//!   the image data): `camera` (model), `make`, `datetime` (`YYYY-MM-DDTHH:MM:SS`, when
//!   the picture was taken), `iso`, `width`, `height`, when present.
//!
//! Reading is bounded (8 KiB, plus at most the JPEG header segments); a file whose
//! EXIF cannot be parsed simply gets no EXIF tags.

use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use exif::{In, Tag, Value};
use sqlvault::TagValue;

const SNIFF: u64 = 8192;

/// The tags of host file `path` (whose metadata is `meta`).
pub fn tags_of(path: &Path, meta: &std::fs::Metadata) -> Vec<(String, TagValue)> {
    let mut tags = vec![
        ("size".to_string(), TagValue::Int(meta.len() as i64)),
        ("mtime".to_string(), TagValue::Int(meta.mtime())),
    ];
    let mut head = Vec::new();
    if let Ok(f) = File::open(path) {
        let _ = f.take(SNIFF).read_to_end(&mut head);
    }
    let Some(kind) = infer::get(&head) else { return tags };
    tags.push(("mime".to_string(), TagValue::from(kind.mime_type())));
    if kind.mime_type() == "image/jpeg" {
        if let Ok(f) = File::open(path) {
            if let Ok(exif) = exif::Reader::new().read_from_container(&mut BufReader::new(f)) {
                exif_tags(&exif, &mut tags);
            }
        }
    }
    tags
}

fn ascii(exif: &exif::Exif, tag: Tag) -> Option<String> {
    match &exif.get_field(tag, In::PRIMARY)?.value {
        Value::Ascii(parts) => {
            let s = String::from_utf8_lossy(parts.first()?)
                .trim_matches(|c: char| c == '\0' || c.is_whitespace())
                .to_string();
            (!s.is_empty()).then_some(s)
        }
        _ => None,
    }
}

fn uint(exif: &exif::Exif, tags: &[Tag]) -> Option<u32> {
    tags.iter().find_map(|t| exif.get_field(*t, In::PRIMARY)?.value.get_uint(0))
}

fn exif_tags(exif: &exif::Exif, out: &mut Vec<(String, TagValue)>) {
    if let Some(m) = ascii(exif, Tag::Model) {
        out.push(("camera".into(), TagValue::Text(m)));
    }
    if let Some(m) = ascii(exif, Tag::Make) {
        out.push(("make".into(), TagValue::Text(m)));
    }
    if let Some(d) = ascii(exif, Tag::DateTimeOriginal).or_else(|| ascii(exif, Tag::DateTime)) {
        // EXIF writes "YYYY:MM:DD HH:MM:SS"; store the sortable ISO 8601 form.
        let b = d.as_bytes();
        let iso = if b.len() == 19 && b[4] == b':' && b[7] == b':' && b[10] == b' ' {
            format!("{}-{}-{}T{}", &d[0..4], &d[5..7], &d[8..10], &d[11..])
        } else {
            d
        };
        out.push(("datetime".into(), TagValue::Text(iso)));
    }
    if let Some(iso) = uint(exif, &[Tag::PhotographicSensitivity]) {
        out.push(("iso".into(), TagValue::Int(iso as i64)));
    }
    if let Some(w) = uint(exif, &[Tag::PixelXDimension, Tag::ImageWidth]) {
        out.push(("width".into(), TagValue::Int(w as i64)));
    }
    if let Some(h) = uint(exif, &[Tag::PixelYDimension, Tag::ImageLength]) {
        out.push(("height".into(), TagValue::Int(h as i64)));
    }
}
