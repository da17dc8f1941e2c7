//! The emulated board's PS GPIO, as Linux's GPIO sysfs shows a Zynq
//! UltraScale+ one to pynq-cpp: one controller (`zynqmp_gpio`, 174 pins: 78
//! MIO, then 96 EMIO, the pins PYNQ's `GPIO.get_gpio_pin` counts from) at
//! sysfs number 338, pins exported with a direction, read and written.
//! Nothing outside drives a pin: an input reads the level last driven on it
//! as an output (0 until then).

use std::collections::BTreeMap;
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
}
