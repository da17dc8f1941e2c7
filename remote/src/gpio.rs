//! The emulated board's PS GPIO, as Linux's GPIO sysfs shows a Zynq
//! UltraScale+ one to pynq-cpp: one controller (`zynqmp_gpio`, 174 pins: 78
//! MIO, then 96 EMIO, the pins PYNQ's `GPIO.get_gpio_pin` counts from) at
//! sysfs number 338, pins exported with a direction, read and written.
//! Nothing outside drives a pin: an input reads the level last driven on it
//! as an output (0 until then). On a real board the same requests go to
//! Linux's GPIO sysfs ([`SysfsGpio`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The controller's label in the device tree.
pub const LABEL: &str = "zynqmp_gpio";
/// Its first pin's sysfs number (`/sys/class/gpio/gpiochip338`).
pub const BASE: i32 = 338;
/// Its pins.
pub const NPINS: i32 = 174;

/// A pin's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    In,
    Out,
}

/// The pins: exported ones with their direction, and every pin's level.
#[derive(Default)]
pub(crate) struct PsGpio {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    exported: BTreeMap<i32, Direction>,
    levels: BTreeMap<i32, i32>,
}

impl PsGpio {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `label` (none: the PS's) names this controller.
    pub(crate) fn names(label: Option<&str>) -> bool {
        label.is_none_or(|l| l.is_empty() || l == LABEL)
    }

    /// Exports pin `index` (a sysfs number) as `direction` (`in` or `out`):
    /// its id.
    pub(crate) fn export(&self, index: i32, direction: &str) -> Result<String, String> {
        if !(BASE..BASE + NPINS).contains(&index) {
            return Err(format!(
                "GPIO {index} is not a pin of {LABEL} ({BASE}..{})",
                BASE + NPINS - 1
            ));
        }
        let d = match direction {
            "in" => Direction::In,
            "out" => Direction::Out,
            other => return Err(format!("GPIO direction {other:?}: 'in' or 'out'")),
        };
        self.state().exported.insert(index, d);
        Ok(index.to_string())
    }

    /// The exported pin `id` names, with its direction.
    fn pin(st: &State, id: &str) -> Result<(i32, Direction), String> {
        let pin = id.parse::<i32>().ok();
        pin.and_then(|p| st.exported.get(&p).map(|&d| (p, d)))
            .ok_or_else(|| format!("GPIO {id:?} is not exported"))
    }

    /// The level of pin `id`.
    pub(crate) fn read(&self, id: &str) -> Result<i32, String> {
        let st = self.state();
        let (pin, _) = Self::pin(&st, id)?;
        Ok(st.levels.get(&pin).copied().unwrap_or(0))
    }

    /// Drives output pin `id` to `value` (0 or 1).
    pub(crate) fn write(&self, id: &str, value: i32) -> Result<(), String> {
        let mut st = self.state();
        let (pin, d) = Self::pin(&st, id)?;
        if d != Direction::Out {
            return Err(format!("GPIO {pin} is an input"));
        }
        if !(0..=1).contains(&value) {
            return Err(format!("GPIO {pin}: value {value} is not 0 or 1"));
        }
        st.levels.insert(pin, value);
        Ok(())
    }

    /// Unexports pin `id`.
    pub(crate) fn unexport(&self, id: &str) -> Result<(), String> {
        let mut st = self.state();
        let (pin, _) = Self::pin(&st, id)?;
        st.exported.remove(&pin);
        Ok(())
    }

    /// Whether pin `id` is exported.
    pub(crate) fn is_exported(&self, id: &str) -> bool {
        Self::pin(&self.state(), id).is_ok()
    }
}

/// A real board's PS GPIO through Linux's GPIO sysfs under `root`, as
/// pynq-cpp drives it: `export`/`unexport`, each pin's `direction` and
/// `value`, and the controller found by its `label`.
pub(crate) struct SysfsGpio {
    /// `/sys/class/gpio` on the board.
    dir: PathBuf,
}

impl SysfsGpio {
    /// The GPIO sysfs of the board under `root`.
    pub(crate) fn new(root: &Path) -> Self {
        SysfsGpio {
            dir: root.join("sys/class/gpio"),
        }
    }

    /// The controller labelled `label` (none: the PS's, `zynqmp_gpio`): its
    /// sysfs name (`gpiochip338`), if the board has it.
    fn chip(&self, label: Option<&str>) -> Option<String> {
        let want = label.filter(|l| !l.is_empty()).unwrap_or(LABEL);
        let mut chips: Vec<String> = std::fs::read_dir(&self.dir)
            .ok()?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("gpiochip"))
            .collect();
        chips.sort();
        chips.into_iter().find(|c| {
            std::fs::read_to_string(self.dir.join(c).join("label")).is_ok_and(|l| l.trim() == want)
        })
    }

    /// The board's path of the controller labelled `label`, or empty.
    pub(crate) fn base_path(&self, label: Option<&str>) -> String {
        self.chip(label)
            .map_or(String::new(), |c| format!("/sys/class/gpio/{c}/"))
    }

    /// The pins of the controller labelled `label`, 0 without one.
    pub(crate) fn npins(&self, label: Option<&str>) -> i32 {
        self.chip(label)
            .and_then(|c| std::fs::read_to_string(self.dir.join(c).join("ngpio")).ok())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The directory of pin `id` (a sysfs number, nothing else).
    fn pin(&self, id: &str) -> Result<PathBuf, String> {
        let n: u32 = id
            .parse()
            .map_err(|_| format!("GPIO {id:?} is not a pin number"))?;
        Ok(self.dir.join(format!("gpio{n}")))
    }

    fn put(path: &Path, text: &str) -> Result<(), String> {
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Exports pin `index` (unless it is) and sets its direction.
    pub(crate) fn export(&self, index: i32, direction: &str) -> Result<String, String> {
        if !["in", "out"].contains(&direction) {
            return Err(format!("GPIO direction {direction:?}: 'in' or 'out'"));
        }
        let id = index.to_string();
        let pin = self.pin(&id)?;
        if !pin.exists() {
            Self::put(&self.dir.join("export"), &id)?;
        }
        Self::put(&pin.join("direction"), direction)?;
        Ok(id)
    }

    /// The level of pin `id`.
    pub(crate) fn read(&self, id: &str) -> Result<i32, String> {
        let path = self.pin(id)?.join("value");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        text.trim()
            .parse()
            .map_err(|_| format!("{}: {:?} is not a level", path.display(), text.trim()))
    }

    /// Drives output pin `id` to `value` (0 or 1).
    pub(crate) fn write(&self, id: &str, value: i32) -> Result<(), String> {
        if !(0..=1).contains(&value) {
            return Err(format!("GPIO {id}: value {value} is not 0 or 1"));
        }
        Self::put(&self.pin(id)?.join("value"), &value.to_string())
    }

    /// Unexports pin `id`.
    pub(crate) fn unexport(&self, id: &str) -> Result<(), String> {
        self.pin(id)?;
        Self::put(&self.dir.join("unexport"), id)
    }

    /// Whether pin `id` is exported.
    pub(crate) fn is_exported(&self, id: &str) -> bool {
        self.pin(id).is_ok_and(|p| p.exists())
    }
}

/// The board's PS GPIO: the emulated controller, or a real board's sysfs.
pub(crate) enum Gpio {
    /// The emulated board's.
    Emulated(PsGpio),
    /// A real board's.
    Sysfs(SysfsGpio),
}

impl Gpio {
    /// Exports pin `index` as `direction`: its id.
    pub(crate) fn export(&self, index: i32, direction: &str) -> Result<String, String> {
        match self {
            Gpio::Emulated(g) => g.export(index, direction),
            Gpio::Sysfs(g) => g.export(index, direction),
        }
    }

    /// The level of pin `id`.
    pub(crate) fn read(&self, id: &str) -> Result<i32, String> {
        match self {
            Gpio::Emulated(g) => g.read(id),
            Gpio::Sysfs(g) => g.read(id),
        }
    }

    /// Drives output pin `id` to `value`.
    pub(crate) fn write(&self, id: &str, value: i32) -> Result<(), String> {
        match self {
            Gpio::Emulated(g) => g.write(id, value),
            Gpio::Sysfs(g) => g.write(id, value),
        }
    }

    /// Unexports pin `id`.
    pub(crate) fn unexport(&self, id: &str) -> Result<(), String> {
        match self {
            Gpio::Emulated(g) => g.unexport(id),
            Gpio::Sysfs(g) => g.unexport(id),
        }
    }

    /// Whether pin `id` is exported.
    pub(crate) fn is_exported(&self, id: &str) -> bool {
        match self {
            Gpio::Emulated(g) => g.is_exported(id),
            Gpio::Sysfs(g) => g.is_exported(id),
        }
    }

    /// The board's path of the controller labelled `label` (none: the
    /// PS's), or empty.
    pub(crate) fn base_path(&self, label: Option<&str>) -> String {
        match self {
            Gpio::Emulated(_) if PsGpio::names(label) => {
                format!("/sys/class/gpio/gpiochip{BASE}/")
            }
            Gpio::Emulated(_) => String::new(),
            Gpio::Sysfs(g) => g.base_path(label),
        }
    }

    /// The pins of the controller labelled `label`, 0 without one.
    pub(crate) fn npins(&self, label: Option<&str>) -> i32 {
        match self {
            Gpio::Emulated(_) if PsGpio::names(label) => NPINS,
            Gpio::Emulated(_) => 0,
            Gpio::Sysfs(g) => g.npins(label),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_drives_its_pin_and_bad_pins_are_named() {
        let g = PsGpio::default();
        let out = g.export(BASE + 78, "out").unwrap();
        assert_eq!(g.read(&out), Ok(0));
        g.write(&out, 1).unwrap();
        assert_eq!(g.read(&out), Ok(1));
        assert!(g.write(&out, 2).unwrap_err().contains("not 0 or 1"));
        // The same pin as an input reads the level driven on it.
        let inp = g.export(BASE + 78, "in").unwrap();
        assert_eq!(g.read(&inp), Ok(1));
        assert!(g.write(&inp, 0).unwrap_err().contains("input"));
        g.unexport(&inp).unwrap();
        assert!(!g.is_exported(&inp));
        assert!(g.read(&inp).unwrap_err().contains("not exported"));
        assert!(
            g.export(BASE + NPINS, "out")
                .unwrap_err()
                .contains("not a pin")
        );
        assert!(g.export(BASE - 1, "in").is_err());
        assert!(
            g.export(BASE, "sideways")
                .unwrap_err()
                .contains("'in' or 'out'")
        );
        assert!(g.read("x").is_err());
    }

    #[test]
    fn sysfs_pins_are_numbers_and_the_chip_is_found_by_label() {
        let root = std::env::temp_dir().join(format!("dmaflow-gpio-{}", std::process::id()));
        let dir = root.join("sys/class/gpio");
        for (chip, label, n) in [("gpiochip0", "other", "8"), ("gpiochip338", LABEL, "174")] {
            std::fs::create_dir_all(dir.join(chip)).unwrap();
            std::fs::write(dir.join(chip).join("label"), format!("{label}\n")).unwrap();
            std::fs::write(dir.join(chip).join("ngpio"), n).unwrap();
        }
        let g = SysfsGpio::new(&root);
        assert_eq!(g.base_path(None), "/sys/class/gpio/gpiochip338/");
        assert_eq!(g.npins(Some("other")), 8);
        assert_eq!(g.npins(Some("none")), 0);
        assert_eq!(g.base_path(Some("none")), "");
        // A pin not exported yet is exported by number; its direction then
        // needs the directory sysfs would make.
        assert!(g.export(416, "out").is_err());
        assert_eq!(std::fs::read_to_string(dir.join("export")).unwrap(), "416");
        std::fs::create_dir_all(dir.join("gpio416")).unwrap();
        assert_eq!(g.export(416, "out").unwrap(), "416");
        g.write("416", 1).unwrap();
        assert_eq!(g.read("416"), Ok(1));
        for bad in ["../x", "-1", "", "4 16"] {
            assert!(
                g.read(bad).unwrap_err().contains("not a pin number"),
                "{bad}"
            );
            assert!(!g.is_exported(bad));
        }
        assert!(g.write("416", 2).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
