//! A test double of the NVML library for child `ganglion` processes: `fake_nvml.c` (its
//! scenarios are listed at its top) built with the host's C compiler as `libnvidia-ml.so.1` in
//! a temporary directory. A command run with [`FakeNvml::apply`] has that directory first on
//! `LD_LIBRARY_PATH` and `FAKE_NVML` set, so the node's NVML inventory loads the double exactly
//! as it loads the driver's library, through the same `dlopen` of the versioned name.

use std::path::Path;
use std::process::Command;

/// The built library and the scenario it plays.
pub(crate) struct FakeNvml {
    dir: tempfile::TempDir,
    scenario: &'static str,
}

impl FakeNvml {
    /// Builds the double for `scenario` (`rm-mismatch`, `mig-a100`, `unidentified`, `l4`).
    /// Panics when the C compiler (`$CC`, else `cc`) fails.
    pub(crate) fn build(scenario: &'static str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fake_nvml.c");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
            .arg(dir.path().join("libnvidia-ml.so.1"))
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("{cc}: {e}"));
        assert!(
            out.status.success(),
            "building the NVML test double: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { dir, scenario }
    }

    /// `cmd` with the double on its library path and the scenario in its environment.
    pub(crate) fn apply<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("LD_LIBRARY_PATH", self.dir.path())
            .env("FAKE_NVML", self.scenario)
    }
}

/// Whether this machine has the NVIDIA driver (then the engine may give containers GPUs and
/// the double's answers would be judged against a real toolkit: the tests skip).
pub(crate) fn real_driver_here() -> bool {
    Path::new("/dev/nvidiactl").exists()
}
