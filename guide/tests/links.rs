//! Every relative link and image in the README and the guide names a file
//! that exists, every reference link has its definition in its own file (a
//! forge renders an undefined one as bare text), and every chapter in `docs/`
//! is one of the guide crate's modules (so its Rust examples are tested).
//! Links between chapters, resolved by rustdoc to the chapters' modules, are
//! checked by `cargo doc` (`.ci/run` denies its warnings).

use std::path::{Path, PathBuf};

use pulldown_cmark::{BrokenLink, Event, LinkType, Options, Parser, Tag};

/// The repository's top directory.
fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README and every page of the guide.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(top().join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, top().join("README.md"));
    pages
}

/// What is wrong with `page`'s links, one line each.
fn broken(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).expect("the page is readable");
    let mut wrong = Vec::new();
    let mut undefined = Vec::new();
    let mut callback = |link: BrokenLink<'_>| {
        // `[text][name]` and `[name][]` with no `[name]: target` below. A bare
        // `[x]` is left alone: in prose it is a register's bit range more often
        // than a link.
        if matches!(link.link_type, LinkType::Reference | LinkType::Collapsed) {
            undefined.push(link.reference.to_string());
        }
        None
    };
    let parser =
        Parser::new_with_broken_link_callback(&text, Options::ENABLE_TABLES, Some(&mut callback));
    for event in parser {
        let dest = match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => dest_url,
            _ => continue,
        };
        let external = ["http://", "https://", "mailto:", "#"];
        if external.iter().any(|p| dest.starts_with(p)) || dest.contains("::") {
            continue;
        }
        let file = dest.split('#').next().unwrap_or(&dest);
        let dir = page.parent().expect("a page is in a directory");
        if !dir.join(file).exists() {
            wrong.push(format!("{}: link to {dest}: no such file", page.display()));
        }
    }
    wrong.extend(
        undefined
            .into_iter()
            .map(|r| format!("{}: reference [{r}] has no definition", page.display())),
    );
    wrong
}

#[test]
fn every_relative_link_names_a_file_and_every_reference_is_defined() {
    let pages = pages();
    assert!(pages.len() > 10, "{pages:?}");
    let wrong: Vec<String> = pages.iter().flat_map(|p| broken(p)).collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_missing_file_and_an_undefined_reference_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.md");
    std::fs::write(
        &page,
        "[here](page.md) [gone](gone.md) [chapter][fabric] DMACR[31:24]\n",
    )
    .unwrap();
    let wrong = broken(&page);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("gone.md"), "{wrong:?}");
    assert!(wrong[1].contains("[fabric]"), "{wrong:?}");
}

#[test]
fn every_chapter_is_a_module_of_the_guide() {
    let lib = std::fs::read_to_string(top().join("guide/src/lib.rs")).unwrap();
    for page in pages().iter().skip(1) {
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        if name != "README.md" {
            assert!(
                lib.contains(&format!("\"{name}\"")),
                "{name} is not in guide/src/lib.rs"
            );
        }
    }
}
