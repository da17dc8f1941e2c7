//! An output file that appears only on success: written beside its final
//! name under a temporary one, renamed at the end, removed on every other way
//! out.

use std::path::{Path, PathBuf};

/// A temporary file beside `output`, renamed to it by [`finish`](Self::finish)
/// and removed if dropped before.
pub struct PartialFile {
    tmp: Option<PathBuf>,
    output: PathBuf,
}

impl PartialFile {
    /// Creates the temporary file for `output`.
    pub fn create(output: &Path) -> std::io::Result<(Self, std::fs::File)> {
        let name = output
            .file_name()
            .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
        let tmp = output.with_file_name(format!(".{name}.{}.partial", std::process::id()));
        let file = std::fs::File::create(&tmp)?;
        Ok((
            PartialFile {
                tmp: Some(tmp),
                output: output.to_path_buf(),
            },
            file,
        ))
    }

    /// The temporary file's path (for error messages while it is written).
    pub fn path(&self) -> &Path {
        self.tmp.as_deref().unwrap_or(&self.output)
    }

    /// Gives the file its final name.
    pub fn finish(mut self) -> std::io::Result<()> {
        match self.tmp.take() {
            Some(tmp) => std::fs::rename(&tmp, &self.output).inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            }),
            None => Ok(()),
        }
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if let Some(p) = self.tmp.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}
