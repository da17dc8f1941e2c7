//! Loading the CUDA driver and listing its devices.

use super::{Error, wrap};
use cudarc::driver::{result, sys};
use std::sync::OnceLock;

/// Loads libcuda and initialises the driver, once per process: `Ok` when the
/// driver answered, [`Error::NoDriver`] when the library is absent.
pub fn load() -> Result<(), Error> {
    static LOADED: OnceLock<Result<(), Error>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            // SAFETY: loading a shared library runs its initialisers; the library
            // searched for is the system's CUDA driver under its own names, and
            // cudarc's loader (which would panic if it were absent) is used only
            // once this has found it.
            if !unsafe { sys::is_culib_present() } {
                return Err(Error::NoDriver);
            }
            match result::init() {
                // A driver with no device to drive.
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => Err(Error::NoDevice {
                    ordinal: 0,
                    count: 0,
                }),
                r => wrap("cuInit", r),
            }
        })
        .clone()
}

/// How many devices the driver sees (0 without a driver).
pub fn count() -> usize {
    load()
        .and_then(|()| wrap("cuDeviceGetCount", result::device::get_count()))
        .map_or(0, |n| n.max(0) as usize)
}

/// The driver's handle of device `ordinal`.
pub(crate) fn device(ordinal: usize) -> Result<sys::CUdevice, Error> {
    load()?;
    let count = count();
    if ordinal >= count {
        return Err(Error::NoDevice { ordinal, count });
    }
    wrap("cuDeviceGet", result::device::get(ordinal as i32))
}

/// What a device is and what it can do, as `dmaflow info` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's ordinal (`cuda:N`).
    pub ordinal: usize,
    /// Its name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Device memory, bytes.
    pub memory: usize,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
    /// Multiprocessors.
    pub multiprocessors: i32,
    /// Copy engines that run beside kernels (`ASYNC_ENGINE_COUNT`): 2 means H2D and
    /// D2H copies run at the same time.
    pub copy_engines: i32,
    /// PCI address, `domain:bus:device.0`.
    pub pci: String,
    /// The PCIe link as the kernel reports it (`/sys/bus/pci/devices/*/current_link_*`):
    /// speed (`32.0 GT/s PCIe`) and width (lanes); `None` where it cannot be read.
    pub link: Option<(String, u32)>,
    /// Whether kernels can read host memory in place (`CAN_MAP_HOST_MEMORY`).
    pub can_map_host: bool,
    /// Whether memory the program already owns can be page-locked for the copy
    /// engines (`HOST_REGISTER_SUPPORTED`).
    pub can_register_host: bool,
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cuda:{} {} ({:.1} GiB, compute {}.{}, {} multiprocessors, {} copy engines, PCI {}",
            self.ordinal,
            self.name,
            self.memory as f64 / (1u64 << 30) as f64,
            self.capability.0,
            self.capability.1,
            self.multiprocessors,
            self.copy_engines,
            self.pci,
        )?;
        match &self.link {
            Some((speed, width)) => write!(f, ", link {speed} x{width})"),
            None => write!(f, ", link not readable)"),
        }
    }
}

/// Every device the driver sees; [`Error::NoDriver`] without a driver, an empty
/// list with a driver and no device.
pub fn devices() -> Result<Vec<DeviceInfo>, Error> {
    match load() {
        Err(Error::NoDevice { .. }) => return Ok(Vec::new()),
        r => r?,
    }
    (0..count()).map(info).collect()
}

/// What device `ordinal` is.
pub fn info(ordinal: usize) -> Result<DeviceInfo, Error> {
    use sys::CUdevice_attribute as A;
    let dev = device(ordinal)?;
    let attr = |a: A| {
        // SAFETY: `dev` came from `cuDeviceGet` for an ordinal the driver counts.
        wrap("cuDeviceGetAttribute", unsafe {
            result::device::get_attribute(dev, a)
        })
    };
    let name = wrap("cuDeviceGetName", result::device::get_name(dev))?;
    // SAFETY: as above.
    let memory = wrap("cuDeviceTotalMem", unsafe {
        result::device::total_mem(dev)
    })?;
    let pci = format!(
        "{:04x}:{:02x}:{:02x}.0",
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
    );
    Ok(DeviceInfo {
        ordinal,
        name,
        memory,
        capability: (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        multiprocessors: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        copy_engines: attr(A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?,
        link: pcie_link(std::path::Path::new("/sys/bus/pci/devices").join(&pci)),
        pci,
        can_map_host: attr(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)? != 0,
        can_register_host: attr(A::CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)? != 0,
    })
}

/// The link speed and width sysfs reports for the PCI function at `dir`.
pub(crate) fn pcie_link(dir: std::path::PathBuf) -> Option<(String, u32)> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let speed = read("current_link_speed")?.trim().to_string();
    let width = read("current_link_width")?.trim().parse().ok()?;
    Some((speed, width))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_or_device_is_an_error_not_a_panic() {
        match devices() {
            Err(e) => assert_eq!(e, Error::NoDriver),
            Ok(list) => {
                let n = list.len();
                assert_eq!(
                    info(n).unwrap_err(),
                    Error::NoDevice {
                        ordinal: n,
                        count: n
                    }
                );
            }
        }
    }

    #[test]
    fn the_link_is_read_from_sysfs_files() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(pcie_link(dir.path().to_path_buf()), None);
        std::fs::write(dir.path().join("current_link_speed"), "32.0 GT/s PCIe\n").unwrap();
        std::fs::write(dir.path().join("current_link_width"), "16\n").unwrap();
        assert_eq!(
            pcie_link(dir.path().to_path_buf()),
            Some(("32.0 GT/s PCIe".to_string(), 16))
        );
    }
}
