//! The semantic suite on the durable embedded store: one file for the suite (each test has a
//! prefix of its own, so its own namespace in the file).
mod common;

fn path() -> common::Target {
    static FILE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let f = FILE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("fg-rust-durable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("suite.db")
    });
    common::Target::Path(f.clone())
}

suite!(path(), []);
