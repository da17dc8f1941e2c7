//! What a stretch of driver work cost the host: wall time and the CPU time of
//! every driver-side thread (the caller, and a kernel-style [`Proxy`] thread when
//! there is one), plus the interrupt delivery the emulated device did meanwhile
//! (on a board the interrupt handler runs on the host CPU;
//! [`interrupt_delivery_cpu`]), never the rest of the emulated device's work,
//! which is hardware on a board. The CPU clock is read outside the wall-clock interval, so its system
//! call does not lengthen the time measured; what the reads themselves cost in
//! CPU (a fraction of a microsecond, calibrated once per process as the median
//! of empty measurements) is taken off every measurement.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use dmaflow::dma::{Proxy, Timing};
use dmaflow::platform::cpu::thread_cpu_time;
use dmaflow::platform::sim::interrupt_delivery_cpu;

/// A running measurement.
pub struct Meter<'a> {
    wall: Instant,
    cpu: Duration,
    delivery: Duration,
    proxy: Option<(&'a Proxy, Duration)>,
}

/// What the work cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// Wall time.
    pub wall: Duration,
    /// CPU time of the driver-side threads, interrupt delivery included.
    pub cpu: Duration,
    /// Of that, the interrupt delivery.
    pub delivery: Duration,
}

impl Cost {
    /// CPU time per unit of work, in microseconds.
    pub fn cpu_us_per(&self, units: usize) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / units.max(1) as f64
    }

    /// CPU time over wall time: 1.0 is one core kept busy throughout.
    pub fn cpu_share(&self) -> f64 {
        if self.wall.is_zero() {
            0.0
        } else {
            self.cpu.as_secs_f64() / self.wall.as_secs_f64()
        }
    }
}

/// Costs added up over the transfers of one point.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    /// Wall time, summed.
    pub wall: Duration,
    /// CPU time of the driver-side threads (interrupt delivery included), summed.
    pub cpu: Duration,
    /// Of that, the interrupt delivery, summed.
    pub delivery: Duration,
    /// Transfers added.
    pub n: usize,
}

impl Tally {
    /// Adds one transfer's cost.
    pub fn add(&mut self, c: Cost) {
        self.wall += c.wall;
        self.cpu += c.cpu;
        self.delivery += c.delivery;
        self.n += 1;
    }

    /// This tally and `other`'s, added up.
    pub fn plus(self, other: Tally) -> Tally {
        Tally {
            wall: self.wall + other.wall,
            cpu: self.cpu + other.cpu,
            delivery: self.delivery + other.delivery,
            n: self.n + other.n,
        }
    }

    /// The sum as one cost.
    pub fn cost(&self) -> Cost {
        Cost {
            wall: self.wall,
            cpu: self.cpu,
            delivery: self.delivery,
        }
    }

    /// Mean interrupt delivery CPU per transfer, in microseconds.
    pub fn delivery_us(&self) -> f64 {
        self.delivery.as_secs_f64() * 1e6 / self.n.max(1) as f64
    }

    /// Mean CPU time per transfer, in microseconds.
    pub fn cpu_us(&self) -> f64 {
        self.cost().cpu_us_per(self.n)
    }

    /// CPU time over wall time while the transfers ran.
    pub fn cpu_share(&self) -> f64 {
        self.cost().cpu_share()
    }
}

/// One point's transfers: each one's wall time and its directions' times
/// (microseconds), and their costs added up.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Wall time per transfer.
    pub total: Vec<f64>,
    /// From programming MM2S to its completion, per transfer.
    pub tx: Vec<f64>,
    /// From programming S2MM to its completion, per transfer.
    pub rx: Vec<f64>,
    /// The transfers' costs.
    pub cost: Tally,
}

impl Samples {
    /// Adds the transfer `m` measured, its directions timed `t`.
    pub fn push(&mut self, m: &Meter<'_>, t: Timing) {
        let cost = m.stop();
        self.total.push(cost.wall.as_secs_f64() * 1e6);
        self.tx.push(t.tx.as_secs_f64() * 1e6);
        self.rx.push(t.rx.as_secs_f64() * 1e6);
        self.cost.add(cost);
    }
}

/// The CPU time an empty measurement shows: the CPU clock's own reads.
pub fn reading_cost() -> Duration {
    static COST: OnceLock<Duration> = OnceLock::new();
    *COST.get_or_init(|| {
        let mut v: Vec<Duration> = (0..2001)
            .map(|_| {
                let c = thread_cpu_time();
                let _w = Instant::now();
                let _e = _w.elapsed();
                thread_cpu_time().saturating_sub(c)
            })
            .collect();
        v.sort();
        v[v.len() / 2]
    })
}

impl<'a> Meter<'a> {
    /// Starts measuring the calling thread (and `proxy`'s driver thread).
    pub fn start(proxy: Option<&'a Proxy>) -> Self {
        reading_cost();
        Meter {
            proxy: proxy.map(|p| (p, p.driver_cpu_time())),
            delivery: interrupt_delivery_cpu(),
            cpu: thread_cpu_time(),
            wall: Instant::now(),
        }
    }

    /// What the work since [`start`](Self::start) cost.
    pub fn stop(&self) -> Cost {
        let wall = self.wall.elapsed();
        let mut cpu = thread_cpu_time()
            .saturating_sub(self.cpu)
            .saturating_sub(reading_cost());
        if let Some((p, before)) = self.proxy {
            cpu += p.driver_cpu_time().saturating_sub(before);
        }
        let delivery = interrupt_delivery_cpu().saturating_sub(self.delivery);
        Cost {
            wall,
            cpu: cpu + delivery,
            delivery,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_measurement_costs_next_to_nothing() {
        assert!(
            reading_cost() < Duration::from_micros(50),
            "{:?}",
            reading_cost()
        );
        let mut cpu: Vec<Duration> = (0..101).map(|_| Meter::start(None).stop().cpu).collect();
        cpu.sort();
        assert!(cpu[50] < Duration::from_micros(1), "{:?}", cpu[50]);
    }

    #[test]
    fn waiting_costs_no_cpu_and_spinning_costs_one_core() {
        // The thread's own CPU: interrupt delivery is counted for the whole
        // process, and other tests deliver interrupts side by side.
        let own = |c: Cost| Cost {
            cpu: c.cpu.saturating_sub(c.delivery),
            ..c
        };
        let m = Meter::start(None);
        std::thread::sleep(Duration::from_millis(40));
        let idle = own(m.stop());
        assert!(idle.wall >= Duration::from_millis(40));
        assert!(idle.cpu_share() < 0.25, "{idle:?}");
        let m = Meter::start(None);
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(40) {
            std::hint::spin_loop();
        }
        let busy = own(m.stop());
        // The share a spinning thread gets depends on what else runs (tests
        // run side by side on two cores), so the bounds are loose: at least
        // 5 ms of the 40, and far more than waiting cost.
        assert!(busy.cpu_share() > 0.125, "{busy:?}");
        assert!(busy.cpu > idle.cpu * 10, "{busy:?} against {idle:?}");
        // At least 5 ms of CPU over 4 units.
        assert!(busy.cpu_us_per(4) >= 1250.0, "{busy:?}");
    }
}
